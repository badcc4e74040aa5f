"""Toy attentions for the generic path's proof of its Q/K/V reading (issue 29).

``SwappedAttention`` is the negative case: a fused projection named ``qkv`` whose forward splits it as
[K | Q | V], so the generic path's [Q | K | V] reading is wrong and must be refused, never reported. The
factories below build the shared toy model (tests/toy_models.py) with a given attention in every block, and
are MODEL specs for the CLI (``tests.toy_readings:swapped``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from tests.toy_models import FactorizedAttention, ToyModel


def heads_of(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, N, H·d_h) → (B, H, N, d_h)."""
    B, N, width = t.shape
    return t.reshape(B, N, heads, width // heads).transpose(1, 2)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ/√d_h) v per head, heads merged back: (B, H, N, d_h) → (B, N, H·d_h)."""
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    out = p @ v
    return out.transpose(1, 2).flatten(2)


class SwappedAttention(nn.Module):
    """A fused ``qkv`` whose rows are [K | Q | V]: not the [Q | K | V] its name suggests."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, q, v = (heads_of(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        return attend(q, k, v)


class PerHeadFusedAttention(nn.Module):
    """A fused ``qkv`` laid out per head, (H, 3, d_h): a layout no family row names, which the catch-all
    [Q | K | V] misreads and the first batch's proof finds among the alternatives."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, _ = x.shape
        t = self.qkv(x).reshape(B, N, self.num_heads, 3, -1).permute(3, 0, 2, 1, 4)  # (3, B, H, N, d_h)
        return attend(t[0], t[1], t[2])


class EinsumAttention(nn.Module):
    """Separate q, k, v whose scores and mix are einsums (no @ anywhere)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (heads_of(m(x), self.num_heads) for m in (self.q, self.k, self.v))
        logits = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
        out = torch.einsum("bhij,bhjd->bihd", logits.softmax(-1), v)
        return out.flatten(2)


class BroadcastScoresAttention(nn.Module):
    """Separate q, k, v whose scores are a broadcast product summed over d_h (no product to watch): q and k
    are proven by P recomputed from them."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (heads_of(m(x), self.num_heads) for m in (self.q, self.k, self.v))
        logits = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) / math.sqrt(q.shape[-1])  # (B, H, N, N)
        out = logits.softmax(-1) @ v
        return out.transpose(1, 2).flatten(2)


class ToyProjections(nn.Module):
    """Separate q, k, v maps under the given names, multi-head softmax attention, no output projection.

    ``kind``: "linear" (nn.Linear), "conv1d" (1×1 Conv1d on (B, d, N)), "conv2d" (1×1 Conv2d on the tokens
    laid out as a (B, d, √N, √N) map); ``names``: the three children's names (e.g. Wq, Wk, Wv)."""

    def __init__(self, d: int, heads: int, names: tuple[str, str, str], kind: str = "linear") -> None:
        super().__init__()
        self.num_heads, self.names, self.kind = heads, names, kind
        for name in names:
            layer = {
                "linear": nn.Linear(d, d),
                "conv1d": nn.Conv1d(d, d, 1),
                "conv2d": nn.Conv2d(d, d, 1),
                "hf_conv1d": Conv1D(d, d),  # transformers' GPT-2-style Conv1D: weight (in, out)
            }
            setattr(self, name, layer[kind])

    def project(self, name: str, x: torch.Tensor) -> torch.Tensor:
        m = getattr(self, name)
        if self.kind == "conv1d":
            return m(x.transpose(1, 2)).transpose(1, 2)  # type: ignore[no-any-return]
        if self.kind == "conv2d":
            B, N, d = x.shape
            side = math.isqrt(N)
            return m(x.transpose(1, 2).reshape(B, d, side, side)).flatten(2).transpose(1, 2)  # type: ignore[no-any-return]
        return m(x)  # type: ignore[no-any-return]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (heads_of(self.project(n, x), self.num_heads) for n in self.names)
        return attend(q, k, v)


class ToyParameters(nn.Module):
    """W_Q, W_K, W_V and their biases as plain parameters, multiplied ``x @ W`` or ``F.linear(x, W)``."""

    def __init__(self, d: int, heads: int, linear: bool = False) -> None:
        super().__init__()
        self.num_heads, self.linear = heads, linear
        names = ("q_proj_weight", "k_proj_weight", "v_proj_weight") if linear else ("w_q", "w_k", "w_v")
        self.names = names
        for name in names:
            setattr(self, name, nn.Parameter(torch.randn(d, d) / math.sqrt(d)))
        self.b_q, self.b_k, self.b_v = (nn.Parameter(0.1 * torch.randn(d)) for _ in range(3))

    def weights(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per role: the right-multiplying W (y = x W + b) and b, as the forward uses them."""
        ws = [getattr(self, n) for n in self.names]
        return [
            (w.T if self.linear else w, b) for w, b in zip(ws, (self.b_q, self.b_k, self.b_v), strict=True)
        ]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (heads_of(x @ w + b, self.num_heads) for w, b in self.weights())
        return attend(q, k, v)


def with_attention(make: Callable[[int, int], nn.Module], d: int = 16, heads: int = 4) -> ToyModel:
    """The shared toy (2 blocks, 32×32 images) with ``make(d, heads)`` as every block's attention."""
    torch.manual_seed(0)
    model = ToyModel(d=d, heads=heads, depth=2)
    for block in model.layers:
        block.attn = make(d, heads)
    model.img_size = 32  # type: ignore[assignment]
    return model.eval()


def swapped() -> ToyModel:
    return with_attention(SwappedAttention)


def factorized() -> ToyModel:
    """No P and K through a softmax over the tokens: the reading cannot be proven (unverified)."""
    return with_attention(FactorizedAttention)


def plain() -> ToyModel:
    """The toy as it is: separate q, k, v the generic path reads and proves."""
    return with_attention(lambda d, h: ToyModel(d=d, heads=h, depth=1).layers[0].attn)


def upper_case() -> ToyModel:
    return with_attention(lambda d, h: ToyProjections(d, h, ("Wq", "Wk", "Wv")))


def head_names() -> ToyModel:
    return with_attention(lambda d, h: ToyProjections(d, h, ("q_head", "k_head", "v_head")))


def conv1d() -> ToyModel:
    return with_attention(lambda d, h: ToyProjections(d, h, ("q", "k", "v"), "conv1d"))


def conv2d() -> ToyModel:
    return with_attention(lambda d, h: ToyProjections(d, h, ("query", "key", "value"), "conv2d"))


def parameters() -> ToyModel:
    return with_attention(lambda d, h: ToyParameters(d, h))


def parameters_linear() -> ToyModel:
    return with_attention(lambda d, h: ToyParameters(d, h, linear=True))


def per_head_fused() -> ToyModel:
    return with_attention(PerHeadFusedAttention)


def einsum() -> ToyModel:
    return with_attention(EinsumAttention)


def broadcast_scores() -> ToyModel:
    return with_attention(BroadcastScoresAttention)


def mixed() -> ToyModel:
    """Its first block's attention read right (separate q, k, v), its second a [K | Q | V] ``qkv``."""
    model = plain()
    model.layers[1].attn = SwappedAttention(16, 4).eval()
    return model


def hf_conv1d() -> ToyModel:
    return with_attention(lambda d, h: ToyProjections(d, h, ("q_lin", "k_lin", "v_lin"), "hf_conv1d"))
