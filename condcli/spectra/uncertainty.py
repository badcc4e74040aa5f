"""The digits a capture supports (docs/math.md#digits-a-capture-supports): the relative uncertainty of a κ
from the rounding of the captured matrix.

Storing a matrix in its capture dtype moves every singular value by at most tol = u·‖X‖_F (Weyl; see
docs/math.md#floors-below-the-captures-resolution). Above the floor, a measured κ = σ_1/σ_k therefore carries
the relative uncertainty r = tol/σ_k (≈ κ/floor): the capture's own κ lies in [κ/(1+r), κ/(1−r)] to first
order in tol/σ_1. Where σ_k ≤ tol the value is a floor: its r is ``inf`` (the true value is at least it, with
no upper bound).

- A product of κ's with uncertainties r_i (μ(LA) = κ(W_Q)κ(W_K)κ(W_V)κ(A_l)³, μ(A) = κ(P)κ(A_l)κ(W_V)) has
  r = Π(1 + r_i) − 1: its interval holds every product of the factors' intervals (weights are stored
  exactly, r = 0).
- A maximum over heads or groups takes the r of the element that attains it.
- A statistic over samples (median, mean, min, max) is monotone in every sample, so its interval is the
  statistic of the samples' lower ends and of their upper ends (:func:`statistic_rel`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


def _mean(v: np.ndarray[Any, Any]) -> float:
    return math.fsum(v.tolist()) / v.size if v.size else math.nan


STATISTICS: dict[str, Callable[[np.ndarray[Any, Any]], float]] = {
    "median": lambda v: float(np.median(v)),
    "mean": _mean,
    "min": lambda v: float(v.min()),
    "max": lambda v: float(v.max()),
}


def rel_of(sigma_min: torch.Tensor, tol: torch.Tensor, below: torch.Tensor) -> torch.Tensor:
    """r = tol/σ_k per matrix; ``inf`` where the matrix is below resolution (its κ is only a floor)."""
    r = tol.to(torch.float64) / sigma_min.to(torch.float64)
    return torch.where(below, torch.full_like(r, torch.inf), r)


def product_rel(*rels: torch.Tensor) -> torch.Tensor:
    """r of a product of independent factors with relative uncertainties ``rels``: Π(1 + r_i) − 1."""
    out = torch.ones_like(rels[0], dtype=torch.float64)
    for r in rels:
        out = out * (1 + r.to(torch.float64))
    return out - 1


def power_rel(rel: torch.Tensor, power: int) -> torch.Tensor:
    """r of a factor raised to ``power`` (κ(A_l)³ in μ(LA)): (1 + r)^power − 1."""
    return (1 + rel.to(torch.float64)) ** power - 1


def max_rel(values: torch.Tensor, rel: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The maximum of ``values`` along ``dim`` and the r of the element that attains it."""
    best, at = values.max(dim=dim)
    return best, rel.expand_as(values).gather(dim, at.unsqueeze(dim)).squeeze(dim)


def statistic_rel(
    values: Sequence[float],
    rel: Sequence[float],
    floors: Sequence[bool] | None,
    statistic: str,
    of: Callable[[np.ndarray[Any, Any]], float],
) -> float:
    """The relative uncertainty r of ``statistic`` (computed by ``of``) over samples with values ``values``,
    relative uncertainties ``rel`` and floor marks ``floors``: the statistic's interval [s/(1+r), s/(1−r)]
    holds the statistic of every choice of samples within theirs (a floor sample lies in [v, ∞)). 0 where the
    statistic is 0 or infinite (nothing to round); ≥ 1 where the interval has no upper end."""
    v = np.asarray(values, dtype=np.float64)
    r = np.asarray(rel, dtype=np.float64)
    f = np.zeros(v.size, bool) if floors is None else np.asarray(floors, dtype=bool)
    s = of(v)
    if v.size == 0 or not math.isfinite(s) or s <= 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(f, v, v / (1 + r))
        hi = np.where(f | (r >= 1), np.inf, v / (1 - np.where(r < 1, r, 0.0)))
    low, high = of(lo), of(hi)
    up = 1.0 - s / high if math.isfinite(high) else 1.0
    down = s / low - 1.0 if low > 0 else math.inf
    return max(up, down, 0.0)
