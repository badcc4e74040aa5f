"""The two largest eigenvalues of a stack of symmetric positive semi-definite operators, by Lanczos.

The operator is given only by its product with a block of vectors (``apply``: (B, n, 1) → (B, n, 1)), so a
step costs what that product costs: O(n²) for AᵀA (two matrix-vector products) or for (AAᵀ)⁻¹ of a
triangular A (two triangular solves). Every Lanczos vector is kept and each new one is orthogonalised
against all of them twice (classical Gram–Schmidt, twice: "twice is enough", Giraud et al. 2005), so the
Ritz values do not repeat the way they do in plain Lanczos, and a step costs O(n·k) more for k vectors.

What this module returns are Ritz pairs and the residual estimates β_k·|s_ki| of exact-arithmetic Lanczos.
They are estimates, not bounds: :mod:`condcli.spectra.causal` turns the Ritz vectors into proven bounds by
products with the matrix itself, and says which parts of its certificate rest on the Krylov space.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Apply = Callable[[torch.Tensor], torch.Tensor]  # (B, n, 1) → (B, n, 1): the operator on one vector per matrix


@dataclass(frozen=True)
class Ritz:
    """The two largest Ritz pairs of each operator of a stack (one pair, repeated, where n = 1)."""

    values: torch.Tensor  # (B, 2) descending
    vectors: torch.Tensor  # (B, n, 2) unit Ritz vectors, column i for values[:, i]
    residuals: torch.Tensor  # (B, 2) Lanczos's estimate of ‖A y − θ y‖ (exact arithmetic)
    steps: int  # Lanczos steps taken


def top_ritz(apply: Apply, start: torch.Tensor, max_steps: int, rtol: tuple[float, float]) -> Ritz:
    """Lanczos from ``start`` (B, n, 1) until, for every operator of the stack, the largest Ritz value's
    residual estimate is within ``rtol[0]`` of it and the second's within ``rtol[1]`` of the largest, or
    ``max_steps`` (or n) steps, or an invariant subspace (a zero residual)."""
    batch, n, _ = start.shape
    m = max(1, min(max_steps, n))
    basis = start.new_zeros(batch, n, m)
    alpha = start.new_zeros(batch, m)
    beta = start.new_zeros(batch, m)
    q = start / torch.linalg.vector_norm(start, dim=(-2, -1), keepdim=True)
    values = vectors = residuals = start.new_zeros(0)
    for j in range(m):
        basis[:, :, j : j + 1] = q
        w = apply(q)
        alpha[:, j] = (q * w).sum((-2, -1))
        seen = basis[:, :, : j + 1]
        for _ in range(2):
            w = w - seen @ (seen.mT @ w)
        b = torch.linalg.vector_norm(w, dim=(-2, -1))
        beta[:, j] = b
        k = j + 1
        if k == m or k >= 4:
            scale = alpha[:, :k].abs().amax(-1)
            breakdown = bool((b <= 4 * n * torch.finfo(b.dtype).eps * scale).any())
            if k == m or breakdown or k % 2 == 0:
                values, vectors, residuals = _ritz(alpha[:, :k], beta[:, :k], seen)
                top = values[:, 0].abs()
                if k == m or breakdown or bool((residuals <= torch.tensor(rtol) * top[:, None]).all()):
                    return Ritz(values, vectors, residuals, k)
        q = w / b[:, None, None]
    return Ritz(values, vectors, residuals, m)  # pragma: no cover - the loop returns at k == m


def _ritz(
    alpha: torch.Tensor, beta: torch.Tensor, basis: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The two largest Ritz pairs of the tridiagonal T (diagonal ``alpha``, off-diagonal ``beta[:, :-1]``)
    with Lanczos vectors ``basis`` (B, n, k), and their residual estimates β_k·|s_ki|."""
    k = alpha.shape[-1]
    t = torch.diag_embed(alpha)
    if k > 1:
        off = torch.diag_embed(beta[:, :-1], offset=1)
        t = t + off + off.mT
    finite = torch.isfinite(t).all((-2, -1))
    evals, evecs = torch.linalg.eigh(torch.where(finite[:, None, None], t, 0.0))  # ascending
    evals = torch.where(finite[:, None], evals, torch.nan)
    pick = [k - 1, max(k - 2, 0)]
    values = evals[:, pick]
    s = evecs[:, :, pick]  # (B, k, 2)
    vectors = basis @ s
    vectors = vectors / torch.linalg.vector_norm(vectors, dim=-2, keepdim=True)
    residuals = beta[:, -1:].abs() * s[:, -1, :].abs()
    return values, vectors, residuals
