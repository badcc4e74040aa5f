"""Proven bounds on κ of square matrices, cheaper than their SVD (docs/math.md#spectra's precision budget).

A layer reports, per sample, the largest κ(P) over its heads (and the largest μ(A)) and whether any head is a
floor. :func:`kappa_bounds` proves, for each head, either that σ_k lies above the capture's resolution or
that it lies below (a floor), and that the κ its SVD path would report (the measurement, or the floor
σ_1/tol) is at most ``kappa_hi``; a head whose bound stays below a maximum already measured by SVD cannot
change that maximum, so it needs no SVD (:mod:`condcli.analysis.headmax`). Every bound below is a
worst-case rounding-error bound (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.), not a
measured constant: a head is spared its SVD only where the proof holds.

For one n×n matrix P (float64, upcast exactly from the capture), with u = eps64/2 and γ_m = m·u/(1 − m·u):

- **σ_k from below.** Ĝ = fl(PᵀP) = PᵀP + F with ‖F‖₂ ≤ γ_n·‖P‖_F² (Thm 3.5; ‖|P|‖₂ ≤ ‖P‖_F). A Cholesky
  factor L̂ that completes has L̂L̂ᵀ = Ĝ + ΔG, ‖ΔG‖₂ ≤ γ_{n+1}·‖L̂‖_F² ≈ γ_{n+1}·‖P‖_F² (Thm 10.3). So
  σ_k(P)² ≥ σ_min(L̂)² − c with c = 2(n+1)·eps64·‖P‖_F² (a margin of 2 over γ_n + γ_{n+1}). And
  σ_min(L̂) ≥ 1/‖L̂⁻¹‖_F, where ‖L̂⁻¹‖_F² = trace(Ĝ⁻¹) is read off ``cholesky_inverse`` to relative error
  η = 4n·eps64·‖L̂‖_F·‖L̂⁻¹‖_F (triangular inversion, Thm 14.1 and §8.1). The Frobenius norm is within
  √(rank) of the 2-norm; on ViT-B's P it is 1.2× σ_k⁻¹ at the median.
- **σ_k from above** (floors). For any x ≠ 0, σ_k ≤ ‖Px‖/‖x‖, and ‖Px‖ ≤ ‖fl(Px)‖ + γ_n·‖P‖_F·‖x‖
  (Thm 3.5) whatever produced x: x = P⁻¹b for a fixed ±1 vector b, then a step of inverse iteration, by
  triangular solves where P is lower triangular (causal attention: O(n²)); σ_k ≤ min|P_ii| there too (an
  eigenvalue). A causal P far below resolution (σ_k ≈ 1e-20) is proven a floor at once.
- **σ_1 from above.** ρ(PᵀP) ≤ ρ(|P|ᵀ|P|) ≤ maxᵢ (|P|ᵀ|P|v)ᵢ/vᵢ for every positive v (Collatz–Wielandt);
  v is the power method from 1 (on Ĝ where it is formed and P ≥ 0, else on |P| by two products a step),
  run until the bound is within 1e-4 of the Rayleigh quotient, and the products of non-negative numbers
  are within γ_n each. Tight for attention probabilities (P ≥ 0).
- **What the SVD would report.** Its σ̂ lie within 4n·eps64·σ_1 of the σ (LAPACK's backward error, with a
  margin), so σ̂_k > tol certainly where σ_k's lower bound less that exceeds tol's upper bound
  (:func:`condcli.spectra.core.precision_tolerance`): the head is no floor and its κ̂ = σ̂_1/σ̂_k is at most
  ``kappa_hi``, which also allows :data:`~condcli.spectra.core.MEASURE_RTOL` (a Gram-path measurement).
  Likewise σ̂_k ≤ tol certainly where σ_k's upper bound plus that lies below tol's lower bound: the head is a
  floor, reported as σ̂_1/tol ≤ ``kappa_hi``.

A matrix proven neither way (σ_k within √c of tol, or below it and not triangular) gets ``kappa_hi`` = ``inf``
and the caller decomposes it. The bounds take square matrices, upcast (and rescaled into the
safe band) as :func:`~condcli.spectra.core.upcast` does: κ and the floor verdict are scale-invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from condcli.spectra._tensor import EPS64, machine_eps
from condcli.spectra.core import MEASURE_RTOL
from condcli.spectra.floor_proof import _floored, _resolved, _sigma_k_above, _tolerance

POWER_STEPS = 32  # most Collatz–Wielandt steps for σ_1 (the bound holds after any number; 4 to 20 make it
# tight to 1e-4 for attention probabilities: σ_2/σ_1 ≈ 0.3 for ViT-B's P, 0.72 for a causal P)


@dataclass(frozen=True)
class KappaBounds:
    """Per matrix, over the leading dims: what its SVD path would report, proven without it."""

    kappa_hi: torch.Tensor  # (...,) float64: the reported κ (or floor) ≤ this; inf where nothing is proven
    kappa_lo: torch.Tensor  # (...,) float64: the reported κ (or floor) ≥ this; 0 where nothing is proven
    resolved: torch.Tensor  # (...,) bool: σ̂_k > tol proven (a measurement, no floor)
    floor: torch.Tensor  # (...,) bool: σ̂_k ≤ tol proven (a floor σ̂_1/tol)


def bound_terms(
    x: torch.Tensor,
    capture_dtype: torch.dtype | str,
    brackets: list[torch.Tensor] | None = None,
    source: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x`` (..., n, n) float64, captured in ``capture_dtype`` → (..., 5): ‖x‖_F², a lower bound on σ_k (0
    where none), an upper bound on σ_k (inf where none), an upper bound on σ_1 (the module docstring), and
    a lower bound on σ_1 (0 where none: the Lanczos path alone gives one). A batchable op: one matrix or a
    stack. For a stack of lower-triangular matrices (causal attention) the floor test comes first, as it
    costs O(n²) there, and the Gram bound only where it proves no floor; other matrices get the Gram bound
    alone (a floor test by LU costs more than the SVDs it spares on ViT-B's P, where 5% of the heads are
    floors). From :data:`condcli.spectra.causal.MIN_TOKENS` on, lower-triangular non-negative matrices
    take :func:`condcli.spectra.causal.brackets` as bounds (``bound_only``: σ_n⁻ from a sketch, which
    :func:`sharpened` may narrow). ``brackets``: where given, those brackets ((..., 5), NaN for a matrix
    whose σ_1 or σ_n bracket is a bound's rather than a report's) are appended to it. ``source``: the
    capture ``x`` was upcast from exactly (float32 or coarser, the same shape), read in its place where
    float64 is not needed: the zeros above the diagonal, the signs, and σ_1's float32 Krylov space (half
    the bytes of x, and no float32 copy)."""
    n = x.shape[-1]
    u = machine_eps(capture_dtype) / 2
    fro2 = torch.linalg.vector_norm(x, dim=(-2, -1)).square()  # no squared copy of x
    lo = torch.zeros_like(fro2)
    hi = torch.full_like(fro2, torch.inf)
    from condcli.spectra import causal  # it builds on this module

    read = x if source is None else source  # the same zeros, signs and finiteness
    if bool(causal.triangular(read).all()):  # one pass over the entries, passed on
        if n >= causal.MIN_TOKENS and bool(causal.finite_non_negative(read).all()):  # Lanczos, O(n²) a step
            low = None if source is None or source.dtype != torch.float32 else source
            terms = causal.brackets(x, capture_dtype, lower=True, bound_only=True, fro2=fro2, low=low)
            if brackets is not None:  # a bound's σ_n⁻ (0 for a floor's) or σ_1 bracket is none to report from
                bound = (terms[..., 3] > 0) | ~(terms[..., 2] <= terms[..., 1] * (1 + causal.RTOL / 4))
                brackets.append(torch.where(bound[..., None], torch.nan, terms))
            _, s1_lo, s1, lo, hi = terms.unbind(-1)
            return torch.stack([fro2, lo, hi, s1, s1_lo], -1)
        hi = _sigma_k_above(x, fro2)
        s1 = _sigma_1_above(x, None)
        rest = ~_floored(hi, _tolerance(fro2, s1, n, u))
        if bool(rest.any()):
            lo[rest] = _sigma_k_below(x[rest], fro2[rest])[0]
    else:
        lo, gram = _sigma_k_below(x, fro2)
        s1 = _sigma_1_above(x, gram)
    return torch.stack([fro2, lo, hi, s1, torch.zeros_like(s1)], -1)


def sharpened(x: torch.Tensor, capture_dtype: torch.dtype | str, terms: torch.Tensor) -> torch.Tensor:
    """:func:`bound_terms` ``terms`` (..., 5) of ``x`` (..., n, n, float64) with σ_k's lower bound narrowed
    by :func:`condcli.spectra.causal.quick_sigma_n` where they came from the Lanczos path and prove no floor
    (a sink head, whose smallest singular values cluster, is bounded by the sketch 60× below its σ_n: a
    third of its Lanczos steps bound it within 1.4×); the others as they are."""
    from condcli.spectra import causal

    n = x.shape[-1]
    if n < causal.MIN_TOKENS:  # bound_terms took no Lanczos path
        return terms
    lower = causal.triangular(x) & causal.finite_non_negative(x)
    open_ = lower & ~kappa_bounds(terms, n, capture_dtype).floor & torch.isfinite(terms[..., 3])
    if not bool(open_.any()):
        return terms
    out = terms.clone()
    quick = causal.quick_sigma_n(x[open_], terms[open_][..., 0], lower=True)
    out[..., 1][open_] = torch.maximum(terms[..., 1][open_], quick)
    return out


def _sigma_k_below(x: torch.Tensor, fro2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A lower bound on σ_k (0 where the Cholesky of the Gram matrix breaks down or the bound is empty),
    and the Gram matrix Ĝ."""
    n = x.shape[-1]
    gram = x.mT @ x
    low, info = torch.linalg.cholesky_ex(gram)
    ok = info == 0
    # a broken-down factor is replaced (its bound is dropped), so that the inverse is finite
    if not bool(ok.all()):
        low = torch.where(ok[..., None, None], low, torch.eye(n, dtype=x.dtype, device=x.device))
    trace_inv = torch.cholesky_inverse(low).diagonal(dim1=-2, dim2=-1).sum(-1)  # ‖L̂⁻¹‖_F²
    # ‖L̂‖_F² = trace(Ĝ + ΔG) ≤ ‖P‖_F²·(1 + 2(n+1)·eps64) (Ĝ's and ΔG's diagonals: γ_n and γ_{n+1})
    eta = 4 * n * EPS64 * (fro2 * (1 + 2 * (n + 1) * EPS64) * trace_inv).sqrt()
    s_low2 = 1 / (trace_inv * (1 + 2 * eta))  # σ_min(L̂)² ≥ this while η ≤ 0.1
    lo2 = s_low2 - 2 * (n + 1) * EPS64 * fro2
    good = ok & (eta <= 0.1) & torch.isfinite(lo2) & (lo2 > 0)
    return torch.where(good, lo2.clamp_min(0).sqrt(), torch.zeros_like(lo2)), gram


def _sigma_1_above(x: torch.Tensor, gram: torch.Tensor | None) -> torch.Tensor:
    """An upper bound on σ_1: ρ(PᵀP) ≤ ρ(|P|ᵀ|P|), by Collatz–Wielandt on Ĝ where it is given and P ≥ 0
    (attention probabilities: Ĝ ≥ 0 then), else on |P| by two matrix-vector products a step."""
    n = x.shape[-1]
    a = x.abs()
    use_gram = gram is not None and bool(x.amin() >= 0)

    def step(v: torch.Tensor) -> torch.Tensor:
        if use_gram and gram is not None:
            return gram @ v
        return ((a @ v).mT @ a).mT  # |P|ᵀ(|P|v) as a row times |P|: no transposed copy of |P|

    v = torch.ones((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)
    y = step(v)
    for i in range(1, POWER_STEPS + 1):
        v = (y / y.amax(-2, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)).clamp_min(1e-30)
        y = step(v)
        if i >= 4 and i % 2 == 0:  # stop once the bound is within 1e-4 of the Rayleigh quotient (≤ ρ)
            upper = (y / v).amax((-2, -1))
            rayleigh = (v * y).sum((-2, -1)) / v.square().sum((-2, -1))
            if bool((upper <= rayleigh * (1 + 1e-4)).all()):
                break
    rho = (y / v).amax((-2, -1))
    return (rho * (1 + 2 * (n + 1) * EPS64)).sqrt() * (1 + EPS64)


def kappa_bounds(terms: torch.Tensor, n: int, capture_dtype: torch.dtype | str) -> KappaBounds:
    """:class:`KappaBounds` from :func:`bound_terms` of n×n matrices captured in ``capture_dtype``."""
    fro2, lo, sk_hi, s1, s1_lo = terms.unbind(-1)
    tolerance = _tolerance(fro2, s1, n, machine_eps(capture_dtype) / 2)
    resolved = _resolved(lo, tolerance)
    floor = _floored(sk_hi, tolerance) & ~resolved
    tol_lo, _, slack = tolerance
    top = s1 * (1 + 4 * n * EPS64) * (1 + 4 * MEASURE_RTOL)  # σ̂_1 (or a Gram path's σ̂_1) at most
    one = torch.ones_like(top)
    measured = top / torch.where(resolved, lo - slack, one)
    floored = top / torch.where(floor, tol_lo, one)
    inf = torch.full_like(top, torch.inf)
    hi = torch.where(resolved, measured, torch.where(floor, floored, inf))
    # σ̂_1 (or a Gram path's) at least this; σ̂_k at most σ_k's upper bound plus the slack, and tol at most
    # tol_hi (the floor's σ̂_1/tol)
    bottom = (s1_lo - slack).clamp_min(0) * (1 - 4 * n * EPS64) * (1 - 4 * MEASURE_RTOL)
    _, tol_hi, _ = tolerance
    low = torch.where(resolved, bottom / (sk_hi + slack), torch.where(floor, bottom / tol_hi, 0.0))
    low = torch.where(torch.isfinite(low), low, 0.0)
    return KappaBounds(hi, low, resolved, floor)
