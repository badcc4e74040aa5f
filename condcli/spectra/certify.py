"""Proven bounds on κ of square matrices, at about half the cost of their SVD (SPEC §2's precision budget).

A layer reports, per sample, the largest κ(P) over its heads (and the largest μ(A)) and whether any head is a
floor. :func:`kappa_bounds` proves, for each head, that σ_k lies above the capture's resolution and that the κ
its SVD would give is at most ``kappa_hi``; a head whose bound stays below a maximum already measured by SVD
cannot change that maximum, so it needs no SVD (:mod:`condcli.analysis.headmax`). Every bound below is a
worst-case rounding-error bound (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.), not a
measured constant: a head is spared its SVD only where the proof holds.

For one n×n matrix P (float64, upcast exactly from the capture), with u = eps64/2 and γ_m = m·u/(1 − m·u):

- **σ_k from below.** Ĝ = fl(PᵀP) = PᵀP + F with ‖F‖₂ ≤ γ_n·‖P‖_F² (Thm 3.5; ‖|P|‖₂ ≤ ‖P‖_F). A Cholesky
  factor L̂ that completes has L̂L̂ᵀ = Ĝ + ΔG, ‖ΔG‖₂ ≤ γ_{n+1}·‖L̂‖_F² ≈ γ_{n+1}·‖P‖_F² (Thm 10.3). So
  σ_k(P)² ≥ σ_min(L̂)² − c with c = 2(n+1)·eps64·‖P‖_F² (a margin of 2 over γ_n + γ_{n+1}). And
  σ_min(L̂) ≥ 1/‖L̂⁻¹‖_F, where ‖L̂⁻¹‖_F² = trace(Ĝ⁻¹) is read off ``cholesky_inverse`` to relative error
  η = 4n·eps64·‖L̂‖_F·‖L̂⁻¹‖_F (triangular inversion, Thm 14.1 and §8.1). The Frobenius norm is within
  √(rank) of the 2-norm; on ViT-B's P it is 1.2× σ_k⁻¹ at the median.
- **σ_1 from above.** ρ(PᵀP) ≤ ρ(|P|ᵀ|P|) ≤ maxᵢ (|P|ᵀ|P|v)ᵢ/vᵢ for every positive v (Collatz–Wielandt);
  v is four steps of the power method from 1, and the products of non-negative numbers are within γ_n each.
  Tight for attention probabilities (P ≥ 0: 1e-6 of σ_1 after four steps on ViT-B).
- **What the SVD would report.** Its σ̂ lie within 4n·eps64·σ_1 of the σ (LAPACK's backward error, with a
  margin), so σ̂_k > tol certainly where σ_k's lower bound less that exceeds tol's upper bound
  (:func:`condcli.spectra.core.precision_tolerance`): the head is no floor and its κ̂ = σ̂_1/σ̂_k is at most
  ``kappa_hi``, which also allows :data:`~condcli.spectra.core.MEASURE_RTOL` (a Gram-path measurement).

A Cholesky that breaks down (σ_k near √c: rounding noise of the Gram matrix) gives no bound: ``kappa_hi`` is
``inf`` and the caller decomposes the matrix. The bounds take square matrices, upcast (and rescaled into the
safe band) as :func:`~condcli.spectra.core.upcast` does: κ and the floor verdict are scale-invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from condcli.spectra._tensor import EPS64, machine_eps
from condcli.spectra.core import MEASURE_RTOL

POWER_STEPS = 4  # Collatz–Wielandt steps for σ_1: the bound holds after any number; 4 make it tight for P


@dataclass(frozen=True)
class KappaBounds:
    """Per matrix, over the leading dims: where the SVD's κ is proven at most ``kappa_hi`` and no floor."""

    kappa_hi: torch.Tensor  # (...,) float64: κ̂ ≤ this where ``resolved``; inf elsewhere
    resolved: torch.Tensor  # (...,) bool: σ̂_k > tol proven (the head is a measurement, not a floor)


def bound_terms(x: torch.Tensor) -> torch.Tensor:
    """``x`` (..., n, n) float64 → (..., 3): ‖x‖_F², a lower bound on σ_k (0 where none), an upper bound on
    σ_1 (see the module docstring). A batchable op: one matrix or a stack."""
    n = x.shape[-1]
    fro2 = x.square().sum((-2, -1))
    gram = x.mT @ x
    low, info = torch.linalg.cholesky_ex(gram)
    ok = info == 0
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    low = torch.where(ok[..., None, None], low, eye)  # a broken-down factor is replaced; its bound is dropped
    trace_inv = torch.cholesky_inverse(low).diagonal(dim1=-2, dim2=-1).sum(-1)  # ‖L̂⁻¹‖_F²
    eta = 4 * n * EPS64 * (low.square().sum((-2, -1)) * trace_inv).sqrt()
    s_low2 = 1 / (trace_inv * (1 + 2 * eta))  # σ_min(L̂)² ≥ this while η ≤ 0.1
    lo2 = s_low2 - 2 * (n + 1) * EPS64 * fro2
    good = ok & (eta <= 0.1) & torch.isfinite(lo2) & (lo2 > 0)
    sigma_k_lo = torch.where(good, lo2.clamp_min(0).sqrt(), torch.zeros_like(lo2))
    # ρ(PᵀP) ≤ ρ(|P|ᵀ|P|); for P ≥ 0 (attention probabilities) that is Ĝ's own, up to Ĝ's rounding
    nonneg = bool(x.amin() >= 0)
    a = gram if nonneg else x.abs().mT @ x.abs()
    v = torch.ones((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)
    for _ in range(POWER_STEPS):
        y = a @ v
        v = (y / y.amax(-2, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)).clamp_min(1e-30)
    rho = (a @ v / v).amax((-2, -1))
    sigma_1_hi = (rho * (1 + 2 * (n + 1) * EPS64)).sqrt() * (1 + EPS64)
    return torch.stack([fro2, sigma_k_lo, sigma_1_hi], -1)


def kappa_bounds(terms: torch.Tensor, n: int, capture_dtype: torch.dtype | str) -> KappaBounds:
    """:class:`KappaBounds` from :func:`bound_terms` of n×n matrices captured in ``capture_dtype``."""
    fro2, lo, s1 = terms.unbind(-1)
    slack = 4 * n * EPS64 * s1  # how far the SVD's σ̂ may lie from σ
    rounding = machine_eps(capture_dtype) / 2 * fro2.sqrt() * (1 + 2 * n * EPS64)
    tol_hi = torch.maximum(rounding, n * EPS64 * s1 * (1 + 4 * n * EPS64))  # precision_tolerance, from above
    sk_lo = lo - slack
    resolved = (sk_lo > tol_hi * (1 + 1e-9)) & (sk_lo > 0) & torch.isfinite(s1)
    hi = s1 * (1 + 4 * n * EPS64) / torch.where(resolved, sk_lo, torch.ones_like(sk_lo))
    hi = hi * (1 + 4 * MEASURE_RTOL)
    return KappaBounds(torch.where(resolved, hi, torch.full_like(hi, torch.inf)), resolved)
