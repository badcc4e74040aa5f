"""Issue 42 (docs/breadth-audit.md): models refused for a false reason, now read and proven:

- plain linear Q/K/V refused as unreadable for their names or wrappers: CPM-Ant's ``project_q/k/v`` and
  Moshi's ``q_proj`` held in a ``MoshiLinear`` (an nn.Linear as ``linear``, flexible linear off);
- a vision model that keeps transformers' default main input (``input_ids``) while its forward reads only
  ``pixel_values`` (MGP-STR, Idefics3's vision tower): it was fed token ids and refused; it gets images."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from bench.sweep_architectures import build_hf
from condcli.adapters.generic.maps import linear_map
from condcli.cli.main import main


@pytest.mark.parametrize(
    ("model_type", "inputs"),
    [
        ("cpmant", "random token ids"),
        ("moshi", "random token ids"),
        ("mgp-str", "synthetic 1/f images"),
        ("idefics3_vision", "synthetic 1/f images"),
    ],
)
def test_read_and_proven_on_the_first_batch(
    model_type: str, inputs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_hf(model_type, tmp_path / "m")
    capsys.readouterr()
    code = main(["spectrum", str(tmp_path / "m"), "--max-samples", "2", "--layers", "0,-1", "--json"])
    assert code in (0, None)
    report = json.loads(capsys.readouterr().out)
    assert inputs in report["inputs"]["description"]
    assert report["layers"] and {layer["qkv_source"] for layer in report["layers"]} == {"generic (verified)"}


class HoldsLinear(nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        setattr(self, name, nn.Linear(4, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def test_only_a_linear_held_as_linear_by_a_linear_named_wrapper_is_read_through() -> None:
    """A ``…Linear`` wrapper is read as its ``linear``; a module of another name or holding it elsewhere is
    not (what it computes is unknown until the first batch proves a reading)."""
    wrapper = type("MoshiLinear", (HoldsLinear,), {})("linear")
    mapped = linear_map(wrapper)
    assert mapped is not None and mapped[0] is wrapper.linear.weight
    assert linear_map(type("Gate", (HoldsLinear,), {})("linear")) is None
    assert linear_map(type("MoshiLinear", (HoldsLinear,), {})("proj")) is None


def test_an_attention_called_by_keyword_gives_its_first_tensor_keyword_as_input() -> None:
    """SAM's mask decoder calls its attention as attn(query=…, key=…, value=…): the probes take the tensor
    the discovery traced as the call's input (the first tensor keyword), not a KeyError on hidden_states
    (an internal error, exit 3)."""
    from condcli.adapters.base import first_input
    from condcli.errors import InternalError

    q, k = torch.randn(1, 3, 4), torch.randn(1, 5, 4)
    assert first_input((), {"query": q, "key": k, "value": k}, None, 1) is q
    assert first_input((), {"mask": None, "hidden_states": k, "query": q}, None, 1) is k
    assert first_input((q,), {"hidden_states": k}, None, 1) is q
    with pytest.raises(InternalError, match="no tensor input"):
        first_input((), {"mask": None}, None, 1)
