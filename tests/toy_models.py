"""A tiny model of no known family: blocks with separate Q/K/V Linear layers and an nn.Softmax over P
(or a factorized attention with no P at all)."""

from __future__ import annotations

import math

import torch
from torch import nn


class ToyAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, d = x.shape
        h = self.num_heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(B, N, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        p = self.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // h))
        return (p @ v).transpose(1, 2).reshape(B, N, d)


class FactorizedAttention(nn.Module):
    """CoaT-like factorized attention: K is normalised over the tokens (softmax over dim 2), then Q reads the
    d_h × d_h context Kᵀ V; there is no q × k probability matrix anywhere."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.num_heads = heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, d = x.shape
        h = self.num_heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(B, N, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        context = k.softmax(dim=2).transpose(-1, -2) @ v  # (B, H, d_h, d_h)
        return (q @ context / math.sqrt(d // h)).transpose(1, 2).reshape(B, N, d)


class ToyBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = ToyAttention(d, heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.norm(x))


class ToyModel(nn.Module):
    def __init__(self, d: int = 16, heads: int = 4, depth: int = 3) -> None:
        super().__init__()
        self.embed = nn.Linear(3 * 8 * 8, d)
        self.layers = nn.ModuleList(ToyBlock(d, heads) for _ in range(depth))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        B = pixel_values.shape[0]
        patches = pixel_values.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(B, -1, 192)
        x = self.embed(patches)
        for layer in self.layers:
            x = layer(x)
        return x


def toy_factory(d: int = 16, heads: int = 4, depth: int = 3, img_size: int = 32) -> ToyModel:
    """A ToyModel that declares the image size it reads: MODEL ``tests.toy_models:toy_factory``."""
    model = ToyModel(d, heads, depth)
    model.img_size = img_size
    return model
