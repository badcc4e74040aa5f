"""Attention or not (issue 29, point 3): a hybrid's state-space blocks are not read as attention.

A tiny random-init Jamba (Mamba, attention, Mamba, attention; the PyTorch Mamba path, no kernels): its
Mamba mixers hold a fused ``in_proj`` and the config names KV heads, yet they compute no softmax, so only
layers 1 and 3 are analysed, and the notes name the others. X, X_l, A_l and P are checked against the
model's own ``hidden_states``, the test's hooks and ``output_attentions`` (eager); W against q/k/v_proj.
A stack of MLP-only blocks, and a stack of Mamba blocks alone, are refused with one line.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers as tf
from torch import nn

from condcli.adapters import adapter_for
from condcli.adapters.generic.mixers import attention_of, is_attention, mixer_of
from condcli.capture import capture
from condcli.errors import InputError
from condcli.inputs.batches import Batch

F64 = torch.float64


def jamba(layers: int = 4, offset: int = 1, period: int = 2) -> nn.Module:
    torch.manual_seed(0)
    config = tf.JambaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_layer_period=period,
        attn_layer_offset=offset,
        expert_layer_period=100,
        expert_layer_offset=99,
        num_experts=1,
        mamba_d_state=4,
        mamba_d_conv=4,
        mamba_expand=2,
        initializer_range=0.3,
    )
    return tf.JambaModel(config).eval()


def tokens() -> Batch:
    ids = torch.randint(5, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])


def test_jamba_analyses_its_attention_blocks_only_and_says_which() -> None:
    model = jamba()
    mixers = [type(layer).__name__ for layer in model.layers]
    assert mixers == ["JambaMambaDecoderLayer", "JambaAttentionDecoderLayer"] * 2
    mamba = model.layers[0].mamba
    assert mixer_of(model.layers[0]) is mamba and attention_of(model.layers[0]) is None
    assert attention_of(model.layers[1]) is model.layers[1].self_attn
    adapter = adapter_for(model)
    assert [s.name for s in adapter.layers] == ["layers.1", "layers.3"]
    hybrid = next(n for n in adapter.notes if n.startswith("hybrid"))
    assert "2 of 4 blocks" in hybrid and "(1, 3)" in hybrid and "blocks 0, 2" in hybrid
    assert "JambaMambaMixer" in hybrid
    assert adapter.embedding.name == "layers.0"  # X enters the stack at its first block, a Mamba one

    batch = tokens()
    cap = capture(adapter, batch)
    seen: dict[str, torch.Tensor] = {}
    handles = [
        model.layers[i].self_attn.register_forward_pre_hook(
            lambda m, a, kw, i=i: seen.__setitem__(f"a{i}", (a or (kw["hidden_states"],))[0]),
            with_kwargs=True,
        )
        for i in (1, 3)
    ]
    try:
        with torch.no_grad():
            model.set_attn_implementation("eager")
            out = model(**batch.inputs, output_hidden_states=True, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    assert len(out.attentions) == 2  # the model's own: one P per attention layer
    torch.testing.assert_close(cap.x, out.hidden_states[0], rtol=0, atol=0)
    for k, i in enumerate((1, 3)):
        layer, spec = cap.layers[k], adapter.layers[k]
        assert layer.x_in is not None and layer.attn_in is not None and layer.probs is not None
        torch.testing.assert_close(layer.x_in, out.hidden_states[i])
        torch.testing.assert_close(layer.attn_in[:, 0], seen[f"a{i}"])
        torch.testing.assert_close(layer.probs[:, 0], out.attentions[k])
        sa = model.layers[i].self_attn
        w = spec.weights()
        for role, lin in zip("qkv", (sa.q_proj, sa.k_proj, sa.v_proj), strict=True):
            assert torch.equal(w.full(role), lin.weight.detach().T.to(F64))  # type: ignore[arg-type]
        assert w.heads == 4 and w.kv_heads == 2


def test_a_mamba_mixer_is_no_attention_though_its_fused_projection_reads_as_one() -> None:
    from condcli.adapters.generic.attn import read

    mamba = jamba(2, 1, 2).layers[0].mamba
    reading = read(mamba)  # the fused in_proj and the config's KV heads: readable as Q/K/V …
    assert reading is not None and reading.kind == "in_proj"
    assert not is_attention(mamba, reading)  # … but it computes no softmax


class MLPBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class MLPStack(nn.Module):
    def __init__(self, d: int = 16, depth: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, d)
        self.layers = nn.ModuleList(MLPBlock(d) for _ in range(depth))

    def forward(self, input_ids: torch.Tensor, **_: Any) -> torch.Tensor:
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x)
        return x


def test_an_mlp_only_stack_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="found no stack of blocks with Q/K/V projections") as e:
        adapter_for(MLPStack())
    assert "no attention in any block" in str(e.value) and "\n" not in str(e.value)


def test_a_stack_of_mamba_blocks_alone_has_no_attention_in_any_block() -> None:
    model = jamba(2, 5, 10)  # attention only at layer 5 of 2: none
    assert {type(layer).__name__ for layer in model.layers} == {"JambaMambaDecoderLayer"}
    with pytest.raises(InputError, match="no attention in any block") as e:
        adapter_for(model)
    assert "JambaMambaMixer" in str(e.value) and "\n" not in str(e.value)
    assert "no attention in any block" in str(e.value)


class ScanMixer(nn.Module):
    """A state-space-like token mixer with a fused ``in_proj`` of 3·d rows (readable as [Q | K | V]) and a
    head count, that computes no softmax: a causal running mean of a gated input."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads, self.in_proj, self.out_proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b, c = self.in_proj(x).chunk(3, -1)
        steps = torch.arange(1, x.shape[1] + 1, device=x.device)[None, :, None]
        return self.out_proj(torch.sigmoid(a) * (b.cumsum(1) / steps) + c)


class MixerBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.norm, self.mixer = nn.LayerNorm(d), ScanMixer(d, heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mixer(self.norm(x))


def test_a_vision_hybrid_analyses_its_attention_blocks_and_names_the_others() -> None:
    from tests.toy_models import ToyBlock, ToyModel

    torch.manual_seed(0)
    model = ToyModel(d=16, heads=4, depth=3).eval()
    model.layers[1] = MixerBlock(16, 4)
    adapter = adapter_for(model)
    assert [s.name for s in adapter.layers] == ["layers.0", "layers.2"]
    assert any("no attention in layers.1.mixer (ScanMixer: no softmax)" in n for n in adapter.notes)
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    cap = capture(adapter, Batch({"pixel_values": pixels}, None, ["a", "b"]))
    # the test's own float64 forward up to the last block, from the weights
    m = model.double()
    x = pixels.double().unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(2, -1, 192)
    h = m.embed(x)
    h = m.layers[1](m.layers[0](h))
    block = m.layers[2]
    assert isinstance(block, ToyBlock)
    a = block.norm(h)
    q, k = (lin(a).reshape(2, 16, 4, 4).transpose(1, 2) for lin in (block.attn.q, block.attn.k))
    p = torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1)
    layer = cap.layers[1]
    assert layer.x_in is not None and layer.probs is not None
    torch.testing.assert_close(layer.x_in.to(F64), h, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(layer.probs[:, 0].to(F64), p, rtol=1e-5, atol=1e-6)
