"""Gated positional self-attention (ConViT's GPSA): P is the content softmax, M the gated mix that
multiplies V.

GPSA computes two softmaxes over the keys, the content one P = softmax(q kᵀ·scale) and a positional one
P_pos = softmax(pos_proj(rel_indices)) that does not depend on the tokens, and mixes V with
M = ((1 − σ(g))·P + σ(g)·P_pos) / rowsum, g its per-head ``gating_param``: M is what passes through
``attn_drop`` and multiplies V. P is observed inside the call (the first softmax over the keys), and M is
the layer's mixing matrix (shaped attention, docs/math.md#layers), computed in float64 from P and the
module's own gate, positional projection and relative indices.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import Probe
from condcli.adapters.softmax_tap import FirstSoftmaxTap, tapped_probs

WORDS = (
    "gated positional attention: P = softmax(q kᵀ), the content softmax; the tokens are mixed by "
    "M = (1 − σ(g))·P + σ(g)·softmax(positional scores), rows renormalised"
)


def gated(attn: nn.Module) -> bool:
    """Whether ``attn`` is a gated positional self-attention (a per-head gate, a positional projection of
    relative indices, and q, k from one ``qk`` projection)."""
    return (
        isinstance(getattr(attn, "gating_param", None), nn.Parameter)
        and isinstance(getattr(attn, "pos_proj", None), nn.Linear)
        and isinstance(getattr(attn, "qk", None), nn.Linear)
        and hasattr(attn, "rel_indices")
    )


def gated_probe(attn: nn.Module, heads: int) -> Probe:
    """P: the content softmax of each call, (B, 1, H, N, N)."""
    return Probe(attn, partial(tapped_probs, heads), after=True, tap=FirstSoftmaxTap)


def gated_mixing(attn: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """P (..., H, N, N) → M, in float64, with the module's gate and its positional softmax for N tokens
    (``rel_indices`` as the module's last call left them: (1, N, N, 3))."""

    def mix(p: torch.Tensor) -> torch.Tensor:
        rel = attn.rel_indices
        if rel is None or rel.shape[1] != p.shape[-1]:
            raise ValueError(f"{type(attn).__name__}: no relative indices for {p.shape[-1]} tokens")
        w, b = attn.pos_proj.weight.detach().double(), attn.pos_proj.bias
        scores = rel.detach().double().to(w.device) @ w.T + (0 if b is None else b.detach().double())
        pos = scores[0].permute(2, 0, 1).softmax(-1).to(p.device)  # (H, N, N)
        g = torch.sigmoid(attn.gating_param.detach().double()).to(p.device).view(-1, 1, 1)
        m = (1 - g) * p.double() + g * pos
        mixed: torch.Tensor = m / m.sum(-1, keepdim=True)
        return mixed

    return mix
