"""Shared layers (docs/math.md#layers): ALBERT runs one block num_hidden_layers times; each call is its own
layer, in call order. References: the model's own hidden_states and output_attentions (eager)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import Result

from condcli.adapters import adapter_for
from condcli.capture import capture
from condcli.conditioning import Conditioning
from condcli.errors import InternalError
from condcli.inputs.batches import Batch
from tests.toy_models import ToyModel

LAYERS = 3


def _albert() -> Any:
    from transformers import AlbertConfig, AlbertModel

    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=64,
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=LAYERS,
        intermediate_size=64,
    )
    return AlbertModel(config).eval()


def _batch() -> Batch:
    torch.manual_seed(1)
    ids = torch.randint(0, 64, (2, 7))
    return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])


def test_each_call_of_the_shared_layer_is_its_own_layer() -> None:
    model = _albert()
    adapter = adapter_for(model)
    assert len(adapter.layers) == LAYERS
    assert len({spec.x_in.module for spec in adapter.layers}) == 1  # one module, three layers
    assert len({spec.name for spec in adapter.layers}) == LAYERS
    batch = _batch()
    got = capture(adapter, batch)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(**batch.inputs, output_hidden_states=True, output_attentions=True)
    torch.testing.assert_close(got.x, out.hidden_states[0], rtol=0, atol=0)
    for i in range(LAYERS):
        layer = got.layers[i]
        assert layer.x_in is not None and layer.probs is not None
        torch.testing.assert_close(layer.x_in, out.hidden_states[i], rtol=0, atol=0)
        torch.testing.assert_close(layer.probs, out.attentions[i].unsqueeze(1), rtol=0, atol=0)
    # one layer alone: the calls before it are skipped, not given to it
    only = capture(adapter, batch, layers=[-1], probes=("x_in",))
    assert set(only.layers) == {LAYERS - 1}
    torch.testing.assert_close(only.layers[LAYERS - 1].x_in, out.hidden_states[LAYERS - 1], rtol=0, atol=0)


def test_conditioning_applies_once_at_the_first_call() -> None:
    """X is the shared block's first input: λI_k is added there, and not again at its later calls."""
    adapter = adapter_for(_albert())
    got = capture(adapter, _batch(), probes=("x_in",), conditioning=Conditioning(5.0))
    assert got.x_conditioned is not None
    torch.testing.assert_close(got.x_conditioned, got.x + 5.0 * torch.eye(7, 32))
    torch.testing.assert_close(got.layers[0].x_in, got.x_conditioned)
    block = adapter.layers[0].x_in.module
    x = got.x_conditioned
    with torch.no_grad():
        for i in range(1, LAYERS):  # the block run on as the model does, with no second λI_k
            x = block(x)
            torch.testing.assert_close(got.layers[i].x_in, x)


class _Twice(ToyModel):
    """A toy whose first block runs twice (once where ``twice`` is False)."""

    twice = True

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        B = pixel_values.shape[0]
        x = self.embed(
            pixel_values.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(B, -1, 192)
        )
        x = self.layers[0](self.layers[0](x) if self.twice else x)
        return self.layers[1](x)


def test_a_vision_block_called_twice_is_two_layers_in_call_order() -> None:
    model = _Twice(d=16, heads=4, depth=2).eval()
    adapter = adapter_for(model)  # its trial forward sees the first block run twice
    assert [s.name for s in adapter.layers] == ["layers.0#call0", "layers.0#call1", "layers.1"]
    got = capture(adapter, Batch({"pixel_values": torch.randn(1, 3, 32, 32)}, None, ["a"]))
    with torch.no_grad():
        once = model.layers[0](got.x)
        torch.testing.assert_close(got.layers[1].x_in, once)
        torch.testing.assert_close(got.layers[2].x_in, model.layers[0](once))


def test_a_module_called_more_often_than_its_layers_still_raises() -> None:
    model = _Twice(d=16, heads=4, depth=2).eval()
    model.twice = False
    adapter = adapter_for(model)  # built while each block runs once
    assert len(adapter.layers) == 2
    model.twice = True
    with pytest.raises(InternalError, match="fired twice"):
        capture(adapter, Batch({"pixel_values": torch.randn(1, 3, 32, 32)}, None, ["a"]))


def test_spectrum_on_a_saved_albert(tmp_path: Path, cli: Callable[..., Result]) -> None:
    _albert().save_pretrained(tmp_path)
    result = cli("spectrum", str(tmp_path), "--max-samples", "2", "--batch-size", "2", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["model"]["num_layers"] == LAYERS and len(report["layers"]) == LAYERS
