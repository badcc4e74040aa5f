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
