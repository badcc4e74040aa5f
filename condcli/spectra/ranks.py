"""Rank measures of embedded tokens (docs/math.md#ranks); their formulas are part of the contract.

All are scale-invariant: a matrix or spectrum beyond the safe band (entries near 1e308, or subnormal) is
scaled by a power of two first, where Σσ, σ² or ‖X‖_F would otherwise overflow or underflow.
"""

from __future__ import annotations

import torch

from condcli.spectra._tensor import (
    Tensorish,
    as_float64,
    guarded_ratio,
    per_matrix,
    rescaled,
    rescaled_spectrum,
    svdvals,
)

RANKME_EPS = 1e-7  # the additive constant of RankMe (Garrido et al. 2023)


def effective_rank_of_spectrum(sigma: torch.Tensor) -> torch.Tensor:
    """RankMe: p_i = σ_i/Σσ + 1e-7, erank = exp(−Σ p_i log p_i). A zero spectrum has erank 0."""
    sigma, _ = rescaled_spectrum(sigma)
    total = sigma.sum(-1, keepdim=True)
    p = guarded_ratio(sigma, total, total > 0, 0.0) + RANKME_EPS
    erank = torch.exp(-(p * torch.log(p)).sum(-1))
    return torch.where(total.squeeze(-1) > 0, erank, torch.zeros_like(erank))


def stable_rank_of_spectrum(sigma: torch.Tensor) -> torch.Tensor:
    """Σσ_i²/σ_1² (= ‖X‖_F²/‖X‖_2²). A zero spectrum has stable rank 0."""
    sigma, _ = rescaled_spectrum(sigma)
    s1 = sigma[..., 0]
    return guarded_ratio((sigma**2).sum(-1), s1**2, s1 > 0, 0.0)


def effective_rank(X: Tensorish) -> torch.Tensor:
    """RankMe effective rank of each (uncentered) matrix, float64 — shape (...,)."""
    return effective_rank_of_spectrum(svdvals(rescaled(as_float64(X))[0]))


def stable_rank(X: Tensorish) -> torch.Tensor:
    """Stable rank ‖X‖_F²/σ_1² of each matrix — shape (...,)."""
    return stable_rank_of_spectrum(svdvals(rescaled(as_float64(X))[0]))


def collapse_residual(X: Tensorish) -> torch.Tensor:
    """Rank-collapse residual (Dong et al. 2021): ‖X − 1 x̄ᵀ‖_F / ‖X‖_F, x̄ the token (row) mean.

    0 when all tokens are equal (full collapse), including the zero matrix.
    """
    x, _ = rescaled(as_float64(X))
    resid = per_matrix(lambda m: torch.linalg.matrix_norm(m - m.mean(dim=0, keepdim=True)), x)
    norm = per_matrix(torch.linalg.matrix_norm, x)
    return guarded_ratio(resid, norm, norm > 0, 0.0)


def cumulative_spectrum(sigma: torch.Tensor) -> torch.Tensor:
    """Normalized cumulative spectrum (docs/math.md#rank-decay): c_j = Σ_{i≤j} σ_i / Σ_i σ_i, so c is
    non-decreasing and
    c_n = 1 exactly (the running sum is divided by its own last entry). A zero spectrum gives all 1."""
    sigma, _ = rescaled_spectrum(sigma)
    run = sigma.cumsum(-1)
    total = run[..., -1:]
    return guarded_ratio(run, total, total > 0, 1.0)


def rank_at_fraction(cumulative: torch.Tensor, fraction: float) -> torch.Tensor:
    """The smallest j (counted from 1) with c_j ≥ ``fraction``: how many singular values hold that share
    of the spectrum's mass ("rank at 90%" for 0.9). Integer-valued float64, shape (...,)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return (cumulative < fraction).sum(-1).to(torch.float64) + 1.0
