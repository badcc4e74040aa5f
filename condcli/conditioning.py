"""The paper's fix, applied where X is taken: X + λ·I_k, or the Theorem 4.4 correction X + C
(docs/math.md#spectra, #cli).

Use it in your own training code::

    from condcli.adapters import condition_model
    from condcli.conditioning import ConditionedEmbedding

    model = timm.create_model("vit_base_patch16_224")
    condition_model(model, lam=10.0)        # wraps the embedding point its adapter names (pos_drop here)
    # or by hand, for any module whose output is X (B, N, d):
    model.pos_drop = ConditionedEmbedding(model.pos_drop, lam=10.0)

Each sample is its own matrix: I_k is N×d with k = min(N, d) per sample, and with ``lengths`` (text with
padding) only a sample's real tokens are touched. The shift runs in the model's dtype and is differentiable.
The correction C = σ_1 U_k V_kᵀ is computed per sample in float64 from the detached X and added as a
constant (no gradient flows through its SVD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from condcli.errors import UsageError
from condcli.layout import Layout, from_tokens, to_tokens
from condcli.spectra import correction

Mode = Literal["shift", "correction"]
MODES: tuple[Mode, ...] = ("shift", "correction")


def _valid_rows(x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    """(B, N, 1) mask of real (non-padding) token rows."""
    B, N = x.shape[0], x.shape[1]
    if lengths is None:
        return torch.ones(B, N, 1, dtype=torch.bool, device=x.device)
    rows = torch.arange(N, device=x.device)
    return (rows[None, :] < lengths.to(x.device)[:, None])[..., None]


def shift_tokens(x: torch.Tensor, lam: float, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """X + λ·I_k for every sample of a (B, N, d) batch (or one (N, d) matrix)."""
    if x.ndim == 2:
        return shift_tokens(x[None], lam, None)[0]
    eye = torch.eye(x.shape[1], x.shape[2], dtype=x.dtype, device=x.device)
    return x + lam * (eye * _valid_rows(x, lengths))


def correct_tokens(x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """X + C (Theorem 4.4) for every sample: singular values σ_1 + σ_i, so κ(X + C) ≤ 2."""
    if x.ndim == 2:
        return correct_tokens(x[None], None)[0]
    c = torch.zeros_like(x)
    counts = [x.shape[1]] * x.shape[0] if lengths is None else [int(n) for n in lengths.tolist()]
    for b, n in enumerate(counts):
        if n > 0:
            c[b, :n] = correction(x[b, :n].detach()).to(x.dtype)
    return x + c


@dataclass(frozen=True)
class Conditioning:
    """What to add at the embedding point: ``mode`` "shift" (λ·I_k) or "correction" (Theorem 4.4)."""

    lam: float = 10.0
    mode: Mode = "shift"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown conditioning mode {self.mode!r}", f"use one of {', '.join(MODES)}")
        if not math.isfinite(self.lam):
            raise UsageError(f"`lam` must be a finite number, got {self.lam}", "pass e.g. `lam=10`")

    def apply(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """Condition a (B, N, d) batch of token matrices."""
        if self.mode == "shift":
            return shift_tokens(tokens, self.lam, lengths)
        return correct_tokens(tokens, lengths)

    def apply_to_output(
        self, output: torch.Tensor, layout: Layout, lengths: torch.Tensor | None
    ) -> torch.Tensor:
        """Condition a module output stored in ``layout`` and return it in the same layout."""
        return from_tokens(self.apply(to_tokens(output, layout), lengths), output, layout)

    def describe(self) -> str:
        return f"X + {self.lam:g}·I_k" if self.mode == "shift" else "X + C (Theorem 4.4)"


class ConditionedEmbedding(nn.Module):
    """Wrap the module whose output is X so that its output becomes X + λ·I_k (or X + C)."""

    def __init__(self, inner: nn.Module, lam: float = 10.0, mode: Mode = "shift", layout: Layout = "tokens"):
        super().__init__()
        self.inner = inner
        self.conditioning = Conditioning(float(lam), mode)
        self.layout: Layout = layout

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = self.inner(*args, **kwargs)
        return self.conditioning.apply_to_output(out, self.layout, None)

    def extra_repr(self) -> str:
        return f"{self.conditioning.describe()}, layout={self.layout}"
