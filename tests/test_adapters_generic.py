"""The generic fallback: blocks with Q/K/V found in unknown models, X = first-block input, gaps named."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from condcli.adapters import adapter_for
from condcli.capture import capture
from condcli.conditioning import Conditioning
from condcli.errors import InputError
from condcli.inputs.batches import Batch
from tests.toy_models import ToyModel


def test_generic_adapter_finds_blocks_weights_and_softmax() -> None:
    torch.manual_seed(0)
    model = ToyModel().eval()
    adapter = adapter_for(model)
    assert adapter.family == "generic" and len(adapter.layers) == 3
    assert any("not a known family" in n for n in adapter.notes)
    assert not adapter.embedding.after_position_encoding
    pixels = torch.randn(2, 3, 32, 32)
    got = capture(adapter, Batch({"pixel_values": pixels}, None, ["a", "b"]))
    patches = pixels.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(2, -1, 192)
    torch.testing.assert_close(got.x, model.embed(patches), rtol=0, atol=0)
    layer = got.layers[1]
    assert layer.probs is not None and layer.attn_in is not None
    torch.testing.assert_close(layer.probs.sum(-1), torch.ones(2, 1, 4, 16))
    w = adapter.layers[1].weights()
    a = layer.attn_in[:, 0].double()
    q = torch.einsum("bnd,hde->bhne", a, w.wq) + w.bq[None, :, None]  # type: ignore[index]
    k = torch.einsum("bnd,hde->bhne", a, w.wk) + w.bk[None, :, None]  # type: ignore[index]
    p = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
    torch.testing.assert_close(layer.probs[:, 0].double(), p, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(w.full("q"), model.layers[1].attn.q.weight.T.double())


def test_generic_conditioning_at_the_first_block_input() -> None:
    torch.manual_seed(0)
    model = ToyModel().eval()
    batch = Batch({"pixel_values": torch.randn(1, 3, 32, 32)}, None, ["a"])
    got = capture(adapter_for(model), batch, probes=("x_in",), conditioning=Conditioning(5.0))
    torch.testing.assert_close(got.layers[0].x_in, got.x + 5.0 * torch.eye(16, 16))


def test_unknown_hf_model_distilbert_x_is_hidden_states_0_and_p_is_its_returned_weights() -> None:
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    cfg = DistilBertConfig(vocab_size=50, dim=32, n_layers=2, n_heads=4, hidden_dim=64)
    model = DistilBertModel(cfg).eval()
    adapter = adapter_for(model)
    assert adapter.family == "generic" and adapter.input_kind == "text" and adapter.layers[0].heads == 4
    assert adapter.layers[0].probs is not None and adapter.layers[0].probs_note is None
    assert not adapter.layers[0].causal and adapter.layers[0].window is None
    ids = torch.randint(0, 50, (2, 9))
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    got = capture(adapter, batch)
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
        ref = out.hidden_states
    torch.testing.assert_close(got.x, ref[0], rtol=0, atol=0)
    torch.testing.assert_close(got.layers[1].x_in, ref[1])  # eager vs sdpa attention: float32 rounding
    model.set_attn_implementation("eager")
    with torch.no_grad():
        att = model(input_ids=ids, output_attentions=True).attentions
    for i in (0, 1):  # P: what the eager attention returns, one group
        probs = got.layers[i].probs
        assert probs is not None
        torch.testing.assert_close(probs, att[i].unsqueeze(1))


def test_a_model_without_attention_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="found no stack of blocks with Q/K/V projections") as e:
        adapter_for(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))
    assert "open an issue" in (e.value.hint or "") and "`adapter`" in (e.value.hint or "")


def test_t5_p_is_its_attention_weights_not_its_position_bias() -> None:
    """T5Attention returns (output, position_bias, weights): P is the probability matrix, the last one."""
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    config = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    model = T5EncoderModel(config).eval()
    adapter = adapter_for(model)
    ids = torch.randint(0, 64, (2, 9))
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    got = capture(adapter, batch)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        att = model(input_ids=ids, output_attentions=True).attentions
    assert [layer.index for layer in adapter.layers] == [0, 1]
    for i in (0, 1):
        probs = got.layers[i].probs
        assert probs is not None
        torch.testing.assert_close(probs, att[i].unsqueeze(1))


def test_windowed_hf_attention_groups_windows_per_sample() -> None:
    """HF Swin attends in windows (B·G, n, c): A_l and P are grouped per sample (B, G, …), never taken for
    more samples than there are, and A_l's windows are the ones the attention received."""
    from transformers import SwinConfig, SwinModel

    torch.manual_seed(0)
    config = SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4
    )
    model = SwinModel(config).eval()
    adapter = adapter_for(model)
    batch = Batch({"pixel_values": torch.randn(2, 3, 32, 32)}, None, ["a", "b"])
    seen: list[torch.Tensor] = []
    attn = adapter.layers[0].attn_in.module
    handle = attn.register_forward_pre_hook(
        lambda m, a, k: seen.append(a[0] if a else k["hidden_states"]), with_kwargs=True
    )
    try:
        got = capture(adapter, batch, layers=[0])
    finally:
        handle.remove()
    layer = got.layers[0]
    assert layer.attn_in is not None and layer.probs is not None
    windows = seen[0]  # (B·G, 16, 16): 4 windows of 4×4 tokens per sample
    assert layer.attn_in.shape == (2, windows.shape[0] // 2, 16, 16)
    torch.testing.assert_close(layer.attn_in.reshape(windows.shape), windows, rtol=0, atol=0)
    assert layer.probs.shape[:2] == (2, windows.shape[0] // 2)
