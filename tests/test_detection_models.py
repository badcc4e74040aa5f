"""Issue 42 (docs/breadth-audit.md): detection transformers (DETR, RT-DETR) were refused for inputs because
condcli ran their encoder alone, whose forward reads ``inputs_embeds`` beside ``**kwargs`` and so got nothing;
the model given runs instead. RT-DETR's backbone has no sdpa: switching its attention to eager and back must
restore each part's implementation as it was, not fail (exit 3) on the way back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.sweep_architectures import build_hf
from condcli.loading.hf import analysed_module
from condcli.loading.sources import LoadOptions, load


@pytest.mark.parametrize("model_type", ["detr", "rt_detr"])
def test_the_model_given_runs_not_its_encoder_alone(model_type: str, tmp_path: Path) -> None:
    build_hf(model_type, tmp_path / "m")
    loaded = load(str(tmp_path / "m"), LoadOptions(device="cpu"))
    part, _ = analysed_module(loaded.model)
    assert "Encoder" not in type(part).__name__


def test_attention_switched_back_part_by_part_where_a_part_has_no_sdpa(tmp_path: Path) -> None:
    build_hf("rt_detr", tmp_path / "m")
    loaded = load(str(tmp_path / "m"), LoadOptions(device="cpu"))
    configs = {id(m.config): m.config for m in loaded.model.modules() if hasattr(m, "config")}
    before = {k: c._attn_implementation_internal for k, c in configs.items()}
    assert len(set(before.values())) > 1  # the backbone's differs from the rest
    with loaded.adapter.eager_attention():
        assert loaded.model.config._attn_implementation == "eager"
    assert {k: c._attn_implementation_internal for k, c in configs.items()} == before
    pixels = torch.randn(1, 3, 224, 224)  # enough anchors for its queries
    with torch.no_grad(), loaded.adapter.eager_attention():
        loaded.adapter.run({"pixel_values": pixels})
