"""Issue 42 (docs/breadth-audit.md): which part of a transformers model condcli runs and analyses
(``loading/hf.py`` ``analysed_module``), where the sweep found it chose wrong:

- detection transformers (DETR, RT-DETR) were refused for inputs because condcli ran their encoder alone,
  whose forward reads ``inputs_embeds`` beside ``**kwargs`` and so got nothing: the model given runs instead.
  RT-DETR's backbone has no sdpa: switching its attention to eager and back must restore each part's
  implementation as it was, not fail (exit 3) on the way back;
- an encoder that requires what its model computes (Grounding DINO) is not run alone either;
- a base model that holds only part of the attention (WavTokenizer's encoder) is not analysed alone;
- X-MOD with no default language runs its first language's adapter, and says so.
"""

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


def test_a_base_model_that_holds_only_part_of_the_attention_is_not_analysed_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """WavTokenizer's base_model_prefix names its encoder (convolutions, an LSTM), while its attention is in
    the decoder that the forward also runs: the whole model is analysed, and what stands before that
    attention's q/k/v is said (it was refused `no-attention`, naming the encoder)."""
    from transformers import AutoModel

    from condcli.cli.main import main

    build_hf("wavtokenizer", tmp_path / "m")
    model = AutoModel.from_pretrained(tmp_path / "m")
    assert model.base_model is not model
    part, notes = analysed_module(model)
    assert part is model and any("holds only part of its attention" in n for n in notes)
    build_hf("bert", tmp_path / "bert")  # a base model that holds all the attention is still taken alone
    bert = AutoModel.from_pretrained(tmp_path / "bert")
    assert analysed_module(bert)[0] is bert.base_model
    capsys.readouterr()
    code = main(["spectrum", str(tmp_path / "m"), "--max-samples", "2", "--layers", "0,-1", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "[qkv-unreadable]" in err and "WavTokenizerVocosAttention" in err
    assert "convolutions" in err


def test_an_encoder_that_requires_what_the_model_computes_is_not_run_alone(tmp_path: Path) -> None:
    """Grounding DINO's encoder requires vision features, shapes and level offsets that its model computes:
    run alone it got nothing, and the refusal named those internal tensors; the model runs, and says it needs
    input_ids beside the images."""
    from transformers import AutoModel

    build_hf("grounding-dino", tmp_path / "m")
    model = AutoModel.from_pretrained(tmp_path / "m")
    assert analysed_module(model)[0] is model


def test_xmod_without_a_default_language_runs_its_first_languages_adapter(tmp_path: Path) -> None:
    """X-MOD raised "Input language unknown" on a config that names no default_language (refused as
    inputs): the first of config.languages is run, and a note says so."""
    from transformers import AutoModel

    build_hf("xmod", tmp_path / "m")
    model = AutoModel.from_pretrained(tmp_path / "m")
    assert model.config.default_language is None
    _, notes = analysed_module(model)
    assert model.config.default_language == model.config.languages[0]
    assert any(n.startswith(f"language adapter: {model.config.languages[0]}") for n in notes)
    ids = torch.tensor([[0, 5, 6, 2]])
    with torch.no_grad():
        model(input_ids=ids)  # runs
