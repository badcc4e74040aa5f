"""The softmax tap: P computed as a plain function inside an attention's call, observed there and only there.

Against independent references: the tensors the test computes itself (identity of the recorded tensor, a
float64 softmax of q kᵀ), the torch function-mode stack and hook counts (nothing left after a capture, also
after a forward that raised inside a tapped call), the model's plain output (bitwise equal), and the
module's own code for the attentions whose P does not exist.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import _get_current_function_mode_stack

from condcli.adapters import adapter_for
from condcli.adapters.base import Adapter, Probe, first_input, one_group
from condcli.adapters.softmax_tap import SoftmaxTap, softmax_probe, tapped_probs, unobservable
from condcli.capture import capture
from condcli.inputs.batches import Batch
from tests.recording import hook_count
from tests.toy_models import FactorizedAttention

Tensor = torch.Tensor
SCORES = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(0))  # (B, H, q, k)

OVER_KEYS: dict[str, Callable[[Tensor], Tensor]] = {
    "method keyword": lambda t: t.softmax(dim=-1),
    "method positional": lambda t: t.softmax(-1),
    "method ndim-1": lambda t: t.softmax(t.ndim - 1),
    "torch.softmax": lambda t: torch.softmax(t, -1),
    "torch.softmax keyword": lambda t: torch.softmax(t, dim=-1, dtype=torch.float64),
    "F.softmax": lambda t: F.softmax(t, dim=-1),
    "nn.functional.softmax positional": lambda t: torch.nn.functional.softmax(t, 3),
    "torch._softmax": lambda t: torch._softmax(t, -1, False),
    "torch.special.softmax": lambda t: torch.special.softmax(t, -1),
}


@pytest.mark.parametrize("form", OVER_KEYS)
def test_the_tap_records_a_softmax_over_the_last_dimension_in_every_form(form: str) -> None:
    with SoftmaxTap() as tap:
        p = OVER_KEYS[form](SCORES)
    assert tap.result() is p  # the very tensor the model goes on with


@pytest.mark.parametrize(
    "other",
    [
        lambda t: t.softmax(dim=2),  # CoaT's factorized attention: over the tokens of K
        lambda t: F.softmax(t, 1),
        lambda t: F.log_softmax(t, -1),
        lambda t: t[0, 0].softmax(-1),  # 2-D: no batch axis, not an attention's P
        lambda t: t.exp() / t.exp().sum(-1, keepdim=True),  # normalised by hand: no softmax call
    ],
)
def test_softmaxes_over_other_dimensions_are_not_p(other: Callable[[Tensor], Tensor]) -> None:
    with SoftmaxTap() as tap:
        other(SCORES)
    assert tap.result() is None


def test_the_last_softmax_over_the_keys_is_kept() -> None:
    with SoftmaxTap() as tap:
        first = SCORES.softmax(-1)
        SCORES.softmax(dim=2)
        assert tap.result() is first
        last = torch.softmax(SCORES * 2, -1)
        SCORES.sum()
    assert tap.result() is last


def test_tapped_layouts_become_batch_groups_heads() -> None:
    b, g, h, q, k = 2, 3, 4, 5, 6
    p = torch.arange(b * g * h * q * k, dtype=torch.float64).reshape(b, g, h, q, k)
    assert torch.equal(tapped_probs(h, (), {}, p.reshape(b * g, h, q, k), b), p)  # (B·G, H, q, k)
    assert torch.equal(tapped_probs(h, (), {}, p.reshape(b * g * h, q, k), b), p)  # (B·G·H, q, k)
    assert torch.equal(tapped_probs(h, (), {}, p.transpose(1, 2), b), p)  # Hiera's (B, H, G, q, k)
    assert tapped_probs(h, (), {}, None, b) is None
    assert tapped_probs(h, (), {}, torch.ones(3, h, q, k), b) is None  # not a whole number of samples


# ------------------------------------------------------------------ inside a model, through capture


class Attention(nn.Module):
    """Softmax attention computed as a function; ``inner`` (another attention) runs first when given."""

    def __init__(self, d: int, heads: int, inner: nn.Module | None = None) -> None:
        super().__init__()
        self.num_heads, self.inner, self.fail = heads, inner, False
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.stack_depth: list[int] = []

    def forward(self, x: Tensor) -> Tensor:
        self.stack_depth.append(len(_get_current_function_mode_stack()))
        if self.inner is not None:
            x = self.inner(x)
        B, N, d = x.shape
        q, k, v = (
            t.reshape(B, N, self.num_heads, -1).transpose(1, 2) for t in (self.q(x), self.k(x), self.v(x))
        )
        p = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.num_heads), dim=-1)
        if self.fail:
            raise RuntimeError("failure inside the attention")
        return (p @ v).transpose(1, 2).reshape(B, N, d)


class Block(nn.Module):
    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.norm, self.attn = nn.LayerNorm(8), attn

    def forward(self, x: Tensor) -> Tensor:
        return x + self.attn(self.norm(x))


class Model(nn.Module):
    def __init__(self, nested: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(4, 8)
        inner = Attention(8, 2) if nested else None
        self.blocks = nn.ModuleList([Block(Attention(8, 2, inner)), Block(Attention(8, 2))])
        for block in self.blocks:
            block.attn.q.weight.data.mul_(4.0)  # peaked P: a wrong P would not pass
        self.head = Attention(8, 2)  # an attention outside the blocks: its softmax is never anyone's P

    def forward(self, pixel_values: Tensor) -> Tensor:
        x = self.embed(pixel_values)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batch() -> Batch:
    return Batch(
        {"pixel_values": torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(1))}, None, ["a", "b"]
    )


def reference_probs(attn: Attention, a: Tensor) -> Tensor:
    """float64 softmax(q kᵀ/√d_h) from the attention's input and weights: (B, 1, H, n, n)."""

    def proj(lin: nn.Linear) -> Tensor:
        y = a.double() @ lin.weight.double().T + lin.bias.double()
        return y.unflatten(-1, (attn.num_heads, -1)).transpose(1, 2)

    q, k = proj(attn.q), proj(attn.k)
    return (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1).unsqueeze(1)


def test_capture_observes_each_attentions_own_softmax_and_leaves_nothing_behind() -> None:
    model = Model().eval()
    adapter = adapter_for(model)
    assert [s.probs_note for s in adapter.layers] == [None, None]
    assert "P: the softmax each attention computes, observed inside its call" in adapter.notes
    with torch.no_grad():
        plain = model(**batch().inputs)
    for m in model.modules():
        if isinstance(m, Attention):
            m.stack_depth.clear()
    cap = capture(adapter, batch(), to_end=True)
    for i, block in enumerate(model.blocks):
        got, a = cap.layers[i].probs, cap.layers[i].attn_in
        assert got is not None and a is not None
        torch.testing.assert_close(got.double(), reference_probs(block.attn, a[:, 0]), rtol=1e-5, atol=1e-6)
    # the tap is on the stack only inside the blocks' attention calls, never outside them (the head)
    assert [b.attn.stack_depth for b in model.blocks] == [[1], [1]] and model.head.stack_depth == [0]
    assert hook_count(model) == 0 and _get_current_function_mode_stack() == []
    assert torch.equal(cap.output, plain)  # the model computed exactly what it computes untapped
    with torch.no_grad():
        assert torch.equal(model(**batch().inputs), plain)


def test_an_unchosen_layer_runs_untapped() -> None:
    model = Model().eval()
    cap = capture(adapter_for(model), batch(), layers=[1])
    assert model.blocks[0].attn.stack_depth == [0] and model.blocks[1].attn.stack_depth == [1]
    assert sorted(cap.layers) == [1] and cap.layers[1].probs is not None


def test_a_forward_that_raises_inside_a_tapped_call_leaves_no_mode_and_no_hook() -> None:
    model = Model().eval()
    adapter = adapter_for(model)
    with torch.no_grad():
        before = model(**batch().inputs)
    model.blocks[1].attn.fail = True
    with pytest.raises(RuntimeError, match="failure inside the attention"):
        capture(adapter, batch())
    assert _get_current_function_mode_stack() == [] and hook_count(model) == 0
    model.blocks[1].attn.fail = False
    with torch.no_grad():
        assert torch.equal(model(**batch().inputs), before)


def test_nested_attentions_each_get_their_own_softmax() -> None:
    """An attention that calls another: each tap records the last softmax of its own call, the inner one's
    P inside the inner call and the outer one's own P computed after it."""
    model = Model(nested=True).eval()
    outer = model.blocks[0].attn
    generic = adapter_for(model)
    probe, why = softmax_probe(outer.inner, 2)
    assert probe is not None and why is None
    inner = outer.inner
    x_in, attn_in = Probe(inner, first_input, after=False), Probe(inner, one_group, after=False)
    inner_layer = replace(generic.layers[1], index=2, name="inner", x_in=x_in, attn_in=attn_in, probs=probe)
    adapter: Adapter = replace(generic, layers=(*generic.layers, inner_layer))
    seen: dict[str, Tensor] = {}
    handles = [
        m.register_forward_pre_hook(lambda m, args, name=name: seen.__setitem__(name, args[0]))
        for name, m in (("outer", outer), ("inner", outer.inner))
    ]
    try:
        cap = capture(adapter, batch())
    finally:
        for h in handles:
            h.remove()
    got_outer, got_inner = cap.layers[0].probs, cap.layers[2].probs
    assert got_outer is not None and got_inner is not None
    x_outer = outer.inner(seen["outer"]).detach()  # what the outer attention's own projections read
    torch.testing.assert_close(
        got_inner.double(), reference_probs(outer.inner, seen["inner"]), rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(got_outer.double(), reference_probs(outer, x_outer), rtol=1e-5, atol=1e-6)
    assert _get_current_function_mode_stack() == [] and hook_count(model) == 0


# ------------------------------------------------------------------------- what the module's code says


class Linear(nn.Module):
    """Linear attention (elu + 1 feature maps): no softmax at all."""

    def __init__(self) -> None:
        super().__init__()
        self.num_heads, self.q, self.k, self.v = 1, nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        q, k = F.elu(self.q(x)) + 1, F.elu(self.k(x)) + 1
        return q @ (k.transpose(-1, -2) @ self.v(x)) / (q @ k.sum(1, keepdim=True).transpose(-1, -2))


class Fused(Linear):
    """Only fused attention: P is never materialised."""

    def forward(self, x: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x))


def scores_softmax(q: Tensor, k: Tensor) -> Tensor:
    return torch.softmax(q @ k.transpose(-1, -2), -1)


class Helper(Linear):
    """The softmax lies in a module-level helper function the forward calls."""

    def forward(self, x: Tensor) -> Tensor:
        return scores_softmax(self.q(x), self.k(x)) @ self.v(x)


def test_the_code_says_where_no_softmax_over_the_keys_exists() -> None:
    factorized = unobservable(FactorizedAttention(8, 2))
    assert (
        factorized is not None and "`k.softmax(dim=2)`" in factorized and "FactorizedAttention" in factorized
    )
    linear = unobservable(Linear())
    assert linear is not None and "computes no softmax" in linear
    fused = unobservable(Fused())
    assert fused is not None and "scaled_dot_product_attention" in fused
    mha = unobservable(nn.MultiheadAttention(8, 2, batch_first=True))
    assert mha is not None and "inside PyTorch" in mha
    assert unobservable(Helper()) is None
    assert unobservable(Attention(8, 2)) is None


def test_a_timm_factorized_attention_keeps_p_unobserved_with_its_reason() -> None:
    from timm.models.coat import FactorAttnConvRelPosEnc

    probe, why = softmax_probe(FactorAttnConvRelPosEnc(16, num_heads=2), 2)
    assert probe is None and why is not None and "`k.softmax(dim=2)`" in why


def test_a_layer_without_p_says_why_in_its_note() -> None:
    model = Model().eval()
    for block in model.blocks:
        block.attn = FactorizedAttention(8, 2)
    adapter = adapter_for(model)
    assert all(
        s.probs is None and s.probs_note is not None and "dim=2" in s.probs_note for s in adapter.layers
    )
    cap = capture(adapter, batch())
    assert all(layer.probs is None and layer.attn_in is not None for layer in cap.layers.values())


def test_softmax_probe_reads_heads_for_flat_layouts() -> None:
    attn = Attention(8, 2)
    probe, _ = softmax_probe(attn, 2)
    assert probe is not None and probe.after and probe.tap is SoftmaxTap
    flat = torch.rand(2 * 2, 3, 3)  # (B·H, q, k)
    assert probe.take((), {}, flat, 2).shape == (2, 1, 2, 3, 3)
    assert partial(tapped_probs, 2)((), {}, flat, 2).shape == (2, 1, 2, 3, 3)


def test_an_attention_that_blends_several_softmaxes_has_p_and_its_mixing_matrix() -> None:
    """ConViT's GPSA mixes the tokens with a gated blend of a content and a position softmax: P is the
    content softmax and the blend is its mixing matrix M (numbers: tests/test_generic_gated.py); its MHSA
    layers keep their observed P."""
    import timm

    from condcli.adapters import adapter_for

    torch.manual_seed(0)
    model = timm.create_model(
        "convit_tiny",
        pretrained=False,
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=2,
        local_up_to_layer=1,
    ).eval()
    kinds = [type(b.attn).__name__ for b in model.blocks]
    assert kinds == ["GPSA", "MHSA"]
    gpsa, mhsa = adapter_for(model).layers
    assert gpsa.probs is not None and gpsa.mixing is not None and "gated positional" in gpsa.attention
    assert mhsa.probs is not None and mhsa.probs_note is None
