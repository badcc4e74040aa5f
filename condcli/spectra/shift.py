"""The paper's two fixes for ill-conditioned X: the shift λ·I_k and the Theorem 4.4 correction C
(docs/math.md#spectra).

I_k is the N×d matrix with ones at (i, i), i < k = min(N, d). κ(X + λI_k) is computed exactly — its
singular vectors differ from X's, so it is NOT (σ_1+λ)/(σ_k+λ). Any finite λ works: κ(X + λI_k) =
κ(2^-e X + 2^-e λ I_k), so where X or λ is beyond the safe band (λ ≥ 1.4e154 squares past float64's range in
the Gram update) both are scaled by the same power of two first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from condcli.errors import InputError, UsageError
from condcli.spectra._tensor import (
    Tensorish,
    as_float64,
    guarded_ratio,
    ldexp,
    per_matrix,
    pow2_exponents,
    rescaled,
    rescaled_spectrum,
    svdvals,
)
from condcli.spectra.core import Method, gram_matrix, gram_trustworthy, kappa_from_sigma


def identity_k(
    N: int, d: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """I_k: the N×d matrix with ones on the main k×k diagonal, zeros elsewhere."""
    if not (N >= 1 and d >= 1):
        raise InputError(
            f"I_k needs N, d ≥ 1, got {N}×{d}", "give the shape of a token matrix (N tokens, d dims)"
        )
    return torch.eye(N, d, dtype=dtype, device=device)


# At most this many bytes per (λ, k, k) stack of the Gram update: a long grid is taken in chunks, so memory
# does not grow with it (a 20-point grid stays one chunk up to k ≈ 1300: the same computation as before).
GRAM_GRID_BYTES = 256 << 20


def shift(X: Tensorish, lam: float) -> torch.Tensor:
    """X + λ·I_k in float64 (batched over leading dims); ``lam`` any finite number."""
    x = as_float64(X)
    lams, scalar = _lambda_vector(lam)
    if not scalar:
        raise InputError(f"`lam` must be one number, got a grid of {len(lams)}", "e.g. `lam=10`")
    value = float(lams[0])
    shifted = x + value * identity_k(x.shape[-2], x.shape[-1], device=x.device)
    if not bool(torch.isfinite(shifted).all()):
        raise InputError(f"X + λ·I_k leaves float64's range at `lam={value:g}`", "use a smaller `lam`")
    return shifted


def _lambda_vector(lambdas: float | Sequence[float] | Tensorish) -> tuple[torch.Tensor, bool]:
    """(1-D float64 λ tensor, whether the caller gave a scalar)."""
    try:
        t = (
            torch.as_tensor(np.asarray(lambdas, dtype=np.float64))
            if not isinstance(lambdas, torch.Tensor)
            else lambdas
        )
    except (TypeError, ValueError):
        raise InputError(
            f"λ must be a number or a 1-D grid of numbers, got {lambdas!r}", "e.g. lambdas=[1.0, 10.0]"
        ) from None
    if t.is_complex():
        raise InputError("λ must be real", "e.g. lambdas=[1.0, 10.0]")
    t = t.detach().to("cpu", torch.float64)
    if t.ndim > 1:
        raise UsageError(
            f"λ must be a number or a 1-D grid, got shape {tuple(t.shape)}", "pass a flat list of λ"
        )
    if t.numel() == 0:
        raise UsageError("the λ grid is empty", "give at least one λ")
    if not bool(torch.isfinite(t).all()):
        raise InputError("λ must be finite", "give finite λ values, e.g. lambdas=[1.0, 10.0]")
    return t.reshape(-1), t.ndim == 0


def _shift_gram_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """G0 and the symmetric λ-coefficient S + Sᵀ of the exact Gram update of X + λI_k (one matrix or a batch).

    N ≤ d: (X+λI_k)(X+λI_k)ᵀ = X Xᵀ + λ(X[:, :N] + X[:, :N]ᵀ) + λ² I_N.
    N > d: (X+λI_k)ᵀ(X+λI_k) = XᵀX + λ(X[:d, :] + X[:d, :]ᵀ) + λ² I_d.
    """
    N, d = x.shape[-2:]
    S = x[..., :, :N] if N <= d else x[..., :d, :]  # (..., k, k)
    return gram_matrix(x), S + S.mT


def _shifted_kappa_svd(x: torch.Tensor, lams: torch.Tensor) -> torch.Tensor:
    """κ(X + λI_k) by one float64 SVD per λ — the reference path. Shape (..., L)."""
    N, d = x.shape[-2:]
    eye = identity_k(N, d, device=x.device)
    out = [kappa_from_sigma(svdvals(x + float(lam) * eye), (N, d)) for lam in lams]
    return torch.stack(out, dim=-1)


def shifted_kappa_gram(x: torch.Tensor, lams: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """κ(X + λI_k) for every λ from the exact Gram update, and where that estimate is trustworthy.

    Returns ``(kappa, ok)``, both of shape (..., L). ``x`` must already be float64. Forming
    G0 + λ(S + Sᵀ) + λ²I rounds at the scale (σ_1(X) + |λ|)², not σ_1(X + λI_k)² — when X ≈ −λI_k the terms
    cancel — so trust is judged by (σ_1(X) + |λ|)/σ_k(X + λI_k) ≤ GRAM_MAX_KAPPA, which bounds the relative
    error of σ_k like κ does for an unshifted Gram matrix. Each sample is one eigvalsh batched over the
    λ grid, so a sample's result does not depend on which other samples share its batch.
    """
    N, d = x.shape[-2:]
    k = min(N, d)
    lam = lams.to(x.device)[:, None, None]  # (L, 1, 1)
    eye = torch.eye(k, dtype=x.dtype, device=x.device)
    chunk = max(1, GRAM_GRID_BYTES // (8 * k * k))

    def shifted_spectra(
        G0: torch.Tensor, S2: torch.Tensor, lam: torch.Tensor
    ) -> torch.Tensor:  # (L', k) descending
        ev = torch.linalg.eigvalsh(G0 + lam * S2 + lam * lam * eye)  # (L', k) ascending
        sigma: torch.Tensor = ev.clamp_min(0).sqrt().flip(-1)
        return sigma

    def one(m: torch.Tensor) -> torch.Tensor:  # (N, d) → (2, L): κ estimate, scale-aware κ
        G0, S2 = _shift_gram_parts(m)
        sigma1 = torch.linalg.eigvalsh(G0)[-1].clamp_min(0).sqrt()  # σ_1(X), accurate via Gram
        if len(lams) <= chunk:
            sigma = shifted_spectra(G0, S2, lam)
        else:
            sigma = torch.cat([shifted_spectra(G0, S2, part) for part in torch.split(lam, chunk)])
        scale = torch.stack([sigma1 + lams.to(x.device).abs(), sigma[:, -1]], -1)  # (L, 2)
        return torch.stack([kappa_from_sigma(sigma, (N, d)), kappa_from_sigma(scale, (N, d))])

    both = per_matrix(one, x)  # (..., 2, L)
    return both[..., 0, :], gram_trustworthy(both[..., 1, :])


def shifted_condition_number(
    X: Tensorish, lambdas: float | Sequence[float] | Tensorish, *, method: Method = "auto"
) -> torch.Tensor:
    """Exact κ(X + λ·I_k) per matrix: shape (...,) for a scalar λ, (..., L) for a 1-D grid of L values.

    ``"auto"`` (default) evaluates the grid through the exact Gram update (one X Xᵀ, then one k×k eigvalsh
    per λ) and recomputes by SVD each (sample, λ) whose Gram κ exceeds the accuracy limit
    (:data:`~condcli.spectra.core.GRAM_MAX_KAPPA`); ``"svd"`` is one SVD per λ. λ may be any finite number;
    a (matrix, λ) pair beyond the safe band is computed with both scaled by one power of two.
    """
    x = as_float64(X)
    lams, scalar = _lambda_vector(lambdas)
    if method not in ("auto", "svd"):
        raise UsageError(f"unknown method {method!r}", "use auto or svd")
    if x.numel() == 0:  # a batch of no matrices
        empty = torch.empty(*x.shape[:-2], len(lams), dtype=torch.float64, device=x.device)
        return empty[..., 0] if scalar else empty
    amax = x.abs().amax(dim=(-2, -1))  # (...,)
    e = pow2_exponents(torch.maximum(amax[..., None], lams.to(x.device).abs()))  # (..., L)
    kappa = _shifted(x, lams, method) if not bool(e.any()) else _shifted_rescaled(x, lams, e, method)
    return kappa[..., 0] if scalar else kappa


def _shifted(x: torch.Tensor, lams: torch.Tensor, method: Method) -> torch.Tensor:
    """κ(X + λI_k), shape (..., L), for X and λ inside the safe band."""
    if method == "svd":
        return _shifted_kappa_svd(x, lams)
    kappa, ok = shifted_kappa_gram(x, lams)
    for j in range(len(lams)):
        redo = ~ok[..., j]
        if bool(redo.any()):
            kappa[..., j][redo] = _shifted_kappa_svd(x[redo], lams[j : j + 1])[..., 0]
    return kappa


def _shifted_rescaled(x: torch.Tensor, lams: torch.Tensor, e: torch.Tensor, method: Method) -> torch.Tensor:
    """κ(X + λI_k) = κ(2^-v X + 2^-v λ I_k): each matrix's grid split by the exponent v of max(|X|, |λ|)."""
    flat = x.reshape(-1, *x.shape[-2:])
    exps = e.reshape(-1, e.shape[-1]).cpu()
    out = torch.empty(exps.shape, dtype=torch.float64, device=x.device)
    for i in range(flat.shape[0]):
        for v in torch.unique(exps[i]).tolist():
            cols = torch.nonzero(exps[i] == v).flatten()
            minus = torch.tensor(-v, dtype=torch.int64)
            part = _shifted(ldexp(flat[i : i + 1], minus), ldexp(lams[cols], minus), method)
            out[i, cols.to(x.device)] = part[0]
    return out.reshape(e.shape)


def correction(X: Tensorish) -> torch.Tensor:
    """Theorem 4.4's C = U S̃ Vᵀ with S̃ = σ_1 on all k diagonal entries, i.e. σ_1·U_k V_kᵀ. Shape of X."""

    def one(m: torch.Tensor) -> torch.Tensor:
        U, S, Vh = torch.linalg.svd(m, full_matrices=False)  # (N, k), (k,), (k, d)
        C: torch.Tensor = S[0] * (U @ Vh)
        return C

    x, e = rescaled(as_float64(X))
    C = per_matrix(one, x)
    return C if e is None else ldexp(C, e[..., None, None])


def corrected_condition_number(X: Tensorish) -> torch.Tensor:
    """κ(X + C) = 2σ_1/(σ_1 + σ_k) ≤ 2 (Theorem 4.4); ``inf`` for a zero matrix (X + C = 0)."""
    return corrected_kappa_from_sigma(svdvals(rescaled(as_float64(X))[0]))


def corrected_kappa_from_sigma(sigma: torch.Tensor) -> torch.Tensor:
    """κ(X + C) from X's descending spectra (..., k): 2σ_1/(σ_1 + σ_k), ``inf`` where σ_1 = 0."""
    scaled, _ = rescaled_spectrum(sigma)  # 2σ_1 of σ_1 near 1e308 would overflow
    s1, sk = scaled[..., 0], scaled[..., -1]
    return guarded_ratio(2 * s1, s1 + sk, s1 > 0, torch.inf)
