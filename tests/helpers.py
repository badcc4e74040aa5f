"""Independent float64 NumPy references and matrix builders for the tests (never condcli's own code)."""

from __future__ import annotations

import numpy as np

EPS = np.finfo(np.float64).eps


def np_sigma(X: np.ndarray) -> np.ndarray:
    return np.linalg.svd(np.asarray(X, dtype=np.float64), compute_uv=False)


def np_kappa(X: np.ndarray) -> np.ndarray:
    """σ_1/σ_k per matrix with docs/math.md#spectra's inf rule, via NumPy's LAPACK SVD — of a matrix whose
    largest entry is outside [2^-256, 2^256] scaled first by the power of two that brings it near 1 (exact,
    and κ does not change; LAPACK loses accuracy on subnormal entries: [[2a, a, a], [a, 2a, a]] at a = 5e-324
    gave 3, not √11)."""
    X = np.asarray(X, dtype=np.float64)
    top = np.abs(X).max(axis=(-2, -1), keepdims=True) if X.size else np.ones((*X.shape[:-2], 1, 1))
    outside = np.isfinite(top) & (top > 0) & ((top < 2.0**-256) | (top > 2.0**256))  # else as it is
    _, e = np.frexp(np.where(outside, top, 0.5))  # 0.5 = 2^-1·2^0: exponent 0, no scaling
    X = np.ldexp(X, -e)
    s = np_sigma(X)
    tol = max(X.shape[-2:]) * EPS * s[..., 0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(s[..., -1] <= tol, np.inf, s[..., 0] / s[..., -1])


# eps of each capture dtype, written out (not read from torch.finfo): 2^-(mantissa bits)
DTYPE_EPS = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def np_tol(X: np.ndarray, eps: float) -> np.ndarray:
    """docs/math.md#spectra's below-precision tolerance: u·‖X‖_F with u = eps/2 (‖X‖_F from NumPy's norm, no
    SVD), never below float64's own singularity threshold max(N, d)·eps64·σ_1 (where κ is inf)."""
    X = np.asarray(X, dtype=np.float64)
    rounding = 0.5 * eps * np.linalg.norm(X, "fro", axis=(-2, -1))
    return np.maximum(rounding, max(X.shape[-2:]) * EPS * np_sigma(X)[..., 0])


def np_repeated(X: np.ndarray) -> np.ndarray:
    """(..., n, c) → (...,): whether a matrix has fewer distinct rows (compared exactly) than k = min(n, c):
    exactly singular, κ = inf (docs/math.md#repeated-rows)."""
    X = np.asarray(X)
    flat = X.reshape(-1, *X.shape[-2:])
    k = min(X.shape[-2:])
    return np.array([len(np.unique(m, axis=0)) < k for m in flat]).reshape(X.shape[:-2])


def np_reported_kappa(X: np.ndarray, eps: float) -> np.ndarray:
    """κ as docs/math.md#spectra reports it for a capture of machine epsilon ``eps``: inf where rows repeat
    exactly (fewer distinct than k), else σ_1/σ_k, or where σ_k ≤ tol the floor σ_1/tol (all the captured
    data can tell)."""
    s, tol = np_sigma(X), np_tol(X, eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        reported = np.where(s[..., -1] <= tol, s[..., 0] / tol, np_kappa(X))
    return np.where(np_repeated(X), np.inf, reported)


def np_shifted_kappa(X: np.ndarray, lam: float) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    return np_kappa(X + lam * np.eye(*X.shape[-2:]))


def orthonormal(rng: np.random.Generator, n: int, k: int, batch: tuple[int, ...] = ()) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((*batch, n, k)))
    return q


def prescribed(
    rng: np.random.Generator, N: int, d: int, sigma: np.ndarray, batch: tuple[int, ...] = ()
) -> np.ndarray:
    """Matrices U diag(σ) Vᵀ with random orthonormal U (N×k), V (d×k)."""
    k = min(N, d)
    assert len(sigma) == k
    U, V = orthonormal(rng, N, k, batch), orthonormal(rng, d, k, batch)
    return (U * sigma) @ np.swapaxes(V, -1, -2)


def geometric_sigma(k: int, kappa: float) -> np.ndarray:
    """k singular values from 1 down to 1/κ, evenly spaced in log."""
    return np.logspace(0, -np.log10(kappa), k) if k > 1 else np.ones(1)


def np_cumulative(P: np.ndarray) -> np.ndarray:
    """c_m = Σ_{i≤m} σ_i / Σσ per matrix (docs/math.md#rank-decay), via NumPy's SVD in float64."""
    s = np.linalg.svd(np.asarray(P, dtype=np.float64), compute_uv=False)
    return np.cumsum(s, axis=-1) / s.sum(-1, keepdims=True)


def np_rank90(c: np.ndarray) -> np.ndarray:
    """The first m (counted from 1) where the cumulative spectrum c reaches 0.9."""
    return np.argmax(c >= 0.9 - 1e-12, axis=-1) + 1


def np_erank(P: np.ndarray) -> np.ndarray:
    """RankMe effective rank per matrix: p = σ/Σσ + 1e-7, exp(−Σ p log p)."""
    s = np.linalg.svd(np.asarray(P, dtype=np.float64), compute_uv=False)
    p = s / s.sum(-1, keepdims=True) + 1e-7
    return np.exp(-(p * np.log(p)).sum(-1))
