"""The floor proof shared by :mod:`condcli.spectra.certify` (any square matrix) and
:mod:`condcli.spectra.causal` (attention): σ_k from above by triangular solves (or solves with LU factors),
bounds on the tol the SVD path computes, and where σ̂_k > tol or σ̂_k ≤ tol is proven (the derivations are in
:mod:`condcli.spectra.certify`'s docstring)."""

from __future__ import annotations

import torch

from condcli.spectra._tensor import EPS64

INVERSE_STEPS = 1  # inverse-iteration steps after x = P⁻¹b, for a floor's x: the bound holds after any number
SOLVE_SCALE = (
    2.0**-900
)  # right-hand sides of the floor proof's solves are scaled by this (exact: a power of 2)


def _sigma_k_above(x: torch.Tensor, fro2: torch.Tensor) -> torch.Tensor:
    """An upper bound on σ_k of lower-triangular matrices, from x = P⁻¹b and a step of inverse iteration
    (triangular solves): σ_k ≤ ‖fl(Px)‖/‖x‖ + γ_n‖P‖_F whatever the solves' own error, and σ_k ≤ min|P_ii|
    (an eigenvalue) where they overflow (the module docstring). Where they overflow, the same on trailing
    blocks P[j:, j:] of n/2, n/4, … rows down to 8: σ_k(P) ≤ σ_min(P[j:, j:]), since P maps [0; z] to
    [0; P[j:, j:]z] (a previous-token head's P⁻¹ grows like (P_{i,i−1}/P_ii)^n and overflows float64)."""
    n = x.shape[-1]
    bound = _inverse_iteration_bound(x, fro2)
    m = n // 2
    while m >= 8 and not bool(torch.isfinite(bound).all()):
        open_ = ~torch.isfinite(bound)
        # the block sliced before the mask picks its matrices: a copy of the block, not of each matrix
        bound[open_] = _inverse_iteration_bound(x[..., n - m :, n - m :][open_], fro2[open_])
        m //= 2
    return torch.minimum(bound, x.diagonal(dim1=-2, dim2=-1).abs().amin(-1))


def lu_sigma_k_above(
    x: torch.Tensor, fro2: torch.Tensor, lu: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    """:func:`_sigma_k_above` of square matrices that are not triangular, x from solves with their LU factors
    ``lu`` (``torch.linalg.lu_factor``): the bound holds whatever the factors' error; inf where they
    overflow (no trailing blocks and no diagonal here: those bound σ_k of triangular matrices only)."""
    return _inverse_iteration_bound(x, fro2, lu)


def _inverse_iteration_bound(
    x: torch.Tensor, fro2: torch.Tensor, lu: tuple[torch.Tensor, torch.Tensor] | None = None
) -> torch.Tensor:
    """σ_k ≤ ‖fl(Px)‖/‖x‖ + γ_n‖P‖_F for x from the solves (``fro2``: ‖P‖_F² of the whole matrix, at least
    x's own; ``lu``: P's LU factors, else P is lower triangular); inf where they overflow."""
    n = x.shape[-1]
    sign = torch.Generator().manual_seed(0)
    b = (torch.randint(0, 2, (n, 1), generator=sign) * 2 - 1).to(x.dtype).to(x.device)

    def solve(r: torch.Tensor, adjoint: bool) -> torch.Tensor:
        """P⁻¹r (or P⁻ᵀr), scaled to a largest entry of 1 so that the next solve does not overflow."""
        # r is scaled down first: far below float64's resolution (σ_k ≈ 1e-20) a solve's intermediate
        # values can grow far beyond the solution's and overflow; every finite x still gives a bound
        if lu is not None:
            out = torch.linalg.lu_solve(*lu, r * SOLVE_SCALE, adjoint=adjoint)
        else:
            out = torch.linalg.solve_triangular(x.mT if adjoint else x, r * SOLVE_SCALE, upper=adjoint)
        scaled: torch.Tensor = out / out.abs().amax(-2, keepdim=True)
        return scaled

    v = solve(b.expand(*x.shape[:-1], 1), False)  # ≈ σ_k's right singular vector: Σ (u_iᵀb/σ_i) v_i
    for _ in range(INVERSE_STEPS):  # inverse iteration on PᵀP: v ← P⁻¹P⁻ᵀv
        v = solve(solve(v, True), False)
    norm_v = torch.linalg.vector_norm(v, dim=(-2, -1))
    norm_pv = torch.linalg.vector_norm(x @ v, dim=(-2, -1))
    bound = norm_pv / norm_v * (1 + 4 * n * EPS64) + (n + 1) * EPS64 * fro2.sqrt()
    return torch.where(torch.isfinite(bound) & (norm_v > 0), bound, torch.full_like(bound, torch.inf))


def _tolerance(
    fro2: torch.Tensor, s1: torch.Tensor, n: int, u: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bounds on the tol the SVD path computes (:func:`~condcli.spectra.core.precision_tolerance`, from its
    σ̂) and the slack of its σ̂ (4n·eps64·σ_1): (tol_lo, tol_hi, slack); where σ_1's bound is not finite,
    tol_lo is 0 and tol_hi inf, so that nothing is proven."""
    slack = 4 * n * EPS64 * s1
    fro = fro2.sqrt()
    tol_hi = torch.maximum(u * fro * (1 + 2 * n * EPS64), n * EPS64 * s1 * (1 + 4 * n * EPS64))
    tol_lo = u * (fro - n**0.5 * slack).clamp_min(0) * (1 - 4 * EPS64)
    finite = torch.isfinite(s1)
    return torch.where(finite, tol_lo, 0.0), torch.where(finite, tol_hi, torch.inf), slack


def _resolved(lo: torch.Tensor, tolerance: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Where σ̂_k > tol is proven from σ_k ≥ ``lo``: the SVD path reports a measurement."""
    _, tol_hi, slack = tolerance
    return (lo - slack > tol_hi * (1 + 1e-9)) & (lo - slack > 0)


def _floored(hi: torch.Tensor, tolerance: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Where σ̂_k ≤ tol is proven from σ_k ≤ ``hi``: the SVD path reports the floor σ̂_1/tol."""
    tol_lo, _, slack = tolerance
    return (hi + slack < tol_lo * (1 - 1e-9)) & (tol_lo > 0)
