"""Singular spectra, condition numbers and numerical rank of batched matrices (docs/math.md#spectra).

Every function takes ``X`` of shape ``(..., N, d)`` (torch or numpy, any float dtype, any device), upcasts
exactly to float64 on X's device and returns float64 results over the leading dimensions. k = min(N, d).
A matrix with entries beyond the safe band (near 1e308, or subnormal) is scaled by a power of two first
(:data:`~condcli.spectra._tensor.SAFE_EXPONENT`): κ and ranks are scale-invariant, σ is scaled back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from condcli.errors import UsageError
from condcli.spectra._tensor import (
    EPS64,
    Tensorish,
    as_float64,
    batched,
    groups_where,
    guarded_ratio,
    ldexp,
    machine_eps,
    rescaled,
    rescaled_spectrum,
    svdvals,
)

Method = Literal["auto", "svd"]

# The Gram path squares κ: eigvalsh of X Xᵀ recovers σ_k with relative error ≈ c·eps·κ². Measured here
# (prescribed spectra, N, d ∈ {8…768}): c ≤ 1.5, i.e. 2.6e-10 at κ = 1e3 and ≤ 1.8e-11 at κ = 300. A Gram
# answer is kept only where its κ is at most this value, so Gram and SVD agree to ≤ 1e-10 relative
# (tests/test_spectra_gram.py); everything above is recomputed with SVD. docs/math.md#spectra allows the Gram
# path up to κ ≈ 1e6 (error ≈ 1e-4 there); this is the stricter choice that meets the 1e-10 target.
GRAM_MAX_KAPPA = 300.0

# The precision budget of the analysis path (docs/math.md#spectra): every κ reported as a measurement agrees
# with float64 SVD of the same matrix to ≤ MEASURE_RTOL relative.
MEASURE_RTOL = 1e-6
# Error of the float64 Gram path on the squared singular values: |λ̂_i − σ_i²| ≤ δ with
# δ = GRAM_ERROR·sqrt(max(N, d))·eps64·‖X‖_F² (forming X Xᵀ and eigvalsh, both backward stable). Measured here
# on ViT-B's captured P (197×197) and X_l (197×768) and on prescribed spectra: the largest
# |λ̂_i − σ_i²|/(sqrt(max(N, d))·eps64·‖X‖_F²) was 1.2; GRAM_ERROR keeps a margin over that.
GRAM_ERROR = 4.0


# the capture dtypes whose every value lies in float64's safe band (:func:`upcast` never rescales them)
IN_BAND = (torch.float32, torch.float16, torch.bfloat16)


def upcast(X: Tensorish) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``X`` as float64 (exact), scaled into the safe band where needed: ``rescaled(as_float64(X))``.

    A tensor captured in float32, bf16 or fp16 always lies in the band (|x| < 2^128, subnormals > 2^-150:
    :data:`~condcli.spectra._tensor.SAFE_EXPONENT`), so its scan for the largest entry is skipped: the same
    result, without a pass over a float64 copy of every matrix.
    """
    if isinstance(X, torch.Tensor) and X.dtype in IN_BAND:
        return as_float64(X), None
    return rescaled(as_float64(X))


def singular_values(X: Tensorish) -> torch.Tensor:
    """All k singular values of each matrix, descending, float64 — shape ``(..., k)``.

    A σ beyond float64's range (a matrix of entries near 1e308) is ``inf``.
    """
    x, e = upcast(X)
    sigma = svdvals(x)
    return sigma if e is None else ldexp(sigma, e[..., None])


def kappa_from_sigma(sigma: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """κ = σ_1/σ_k from descending spectra, ``inf`` where σ_k ≤ max(N, d)·eps64·σ_1 (numerically singular).

    ``shape`` is (N, d) of the matrices the spectra came from. A zero matrix has κ = inf.
    """
    s1, sk = sigma[..., 0], sigma[..., -1]
    return guarded_ratio(s1, sk, sk > max(shape) * EPS64 * s1, torch.inf)


def gram_matrix(X: torch.Tensor) -> torch.Tensor:
    """The k×k Gram matrix: X Xᵀ for N ≤ d, Xᵀ X for N > d (same nonzero spectrum, σ_i²)."""
    N, d = X.shape[-2:]
    return X @ X.mT if N <= d else X.mT @ X  # (..., k, k)


def gram_eigen_spectrum(X: torch.Tensor) -> torch.Tensor:
    """Singular values from eigvalsh of the k×k float64 Gram matrix, descending (X already float64).

    Accurate for σ_i ≫ sqrt(eps)·σ_1 only; negative rounding noise is clamped to 0.
    """
    ev = batched(lambda m: torch.linalg.eigvalsh(gram_matrix(m)), X)  # ascending
    return ev.clamp_min(0).sqrt().flip(-1)


def gram_trustworthy(kappa_est: torch.Tensor) -> torch.Tensor:
    """Where a Gram-path κ estimate is accurate enough to keep (finite and ≤ GRAM_MAX_KAPPA)."""
    return torch.isfinite(kappa_est) & (kappa_est <= GRAM_MAX_KAPPA)


def condition_number(X: Tensorish, *, method: Method = "auto") -> torch.Tensor:
    """κ(X) = σ_1/σ_k per matrix, float64, ``inf`` where numerically singular — shape ``(...,)``.

    ``method="svd"`` uses float64 SVD. ``"auto"`` (default) uses the faster Gram path and recomputes with SVD
    every matrix whose Gram estimate exceeds :data:`GRAM_MAX_KAPPA`, so the answer agrees with SVD to
    ≤ 1e-10 relative. (The raw Gram answer is not offered: near singularity it floors σ_k at ≈ sqrt(eps)·σ_1
    and would report κ ≈ 1e8 for a singular matrix.)
    """
    x, _ = upcast(X)  # κ is scale-invariant
    shape = (x.shape[-2], x.shape[-1])
    if method == "svd":
        return kappa_from_sigma(svdvals(x), shape)
    if method != "auto":
        raise UsageError(f"unknown method {method!r}", "use auto or svd")
    kappa = kappa_from_sigma(gram_eigen_spectrum(x), shape)
    redo = ~gram_trustworthy(kappa)
    if bool(redo.any()):
        kappa[redo] = kappa_from_sigma(svdvals(x[redo], groups_where(redo)), shape)
    return kappa


def _spectrum(x: torch.Tensor, method: Method) -> torch.Tensor:
    """Descending float64 spectra by SVD, or by the Gram path with SVD where it is not accurate enough."""
    if method == "svd":
        return svdvals(x)
    if method != "auto":
        raise UsageError(f"unknown method {method!r}", "use auto or svd")
    shape = (x.shape[-2], x.shape[-1])
    sigma = gram_eigen_spectrum(x)
    redo = ~gram_trustworthy(kappa_from_sigma(sigma, shape))
    if bool(redo.any()):
        sigma[redo] = svdvals(x[redo], groups_where(redo))
    return sigma


def gram_error(fro2: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """δ, the bound on |λ̂_i − σ_i²| of the float64 Gram path, from ‖X‖_F² (see :data:`GRAM_ERROR`)."""
    return GRAM_ERROR * math.sqrt(max(shape)) * EPS64 * fro2


def gram_verdict(
    ev: torch.Tensor, tol: torch.Tensor, shape: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the Gram eigenvalues ``ev`` (..., k, descending σ̂_i² of X) settle the answer without an SVD:
    ``(measured, floor)`` boolean masks over the leading dims.

    With δ = :func:`gram_error`, σ_k² lies in [λ̂_k − δ, λ̂_k + δ]. The relative error of σ̂_k = sqrt(λ̂_k) is
    then at most δ/(2·lo), lo = λ̂_k − δ (and σ_1's is smaller), so κ̂ = σ̂_1/σ̂_k is a measurement within
    :data:`MEASURE_RTOL` of SVD's where δ/(2·lo) ≤ MEASURE_RTOL/4 and lo > tol² (σ_k certainly above the
    capture's resolution): every σ_i ≥ σ_k is then as accurate and the numerical rank is k. It is a floor
    (σ_k ≤ tol certainly) where λ̂_k + δ ≤ tol² and no λ̂_i lies within δ of tol² (so the rank is certain too).
    In float32, tol² = 16·eps64·‖X‖_F² is below δ for every max(N, d) ≥ 16: the Gram path decides floors
    only for coarser captures (bf16, fp16); the rest goes to SVD.
    """
    fro2 = ev.clamp_min(0).sum(-1)
    delta = gram_error(fro2, shape)
    lo = ev[..., -1] - delta
    tol2 = tol.square()
    measured = (lo > tol2) & (lo > 0) & (delta <= MEASURE_RTOL / 2 * lo)
    ambiguous = ((ev - tol2[..., None]).abs() <= delta[..., None]).any(-1)
    floor = (ev[..., -1] + delta <= tol2 * (1 - 1e-9)) & ~ambiguous
    return measured, floor


def precision_tolerance(
    sigma: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype | str
) -> torch.Tensor:
    """tol = u·‖X‖_F, u = eps(dtype)/2 the unit roundoff, from descending spectra ``sigma`` (..., k).

    Storing X in ``dtype`` rounds each entry by at most u relative: a perturbation E with
    ‖E‖_2 ≤ ‖E‖_F ≤ u‖X‖_F, so by Weyl's inequality no σ_i ≤ tol can be told from that rounding
    (docs/math.md#spectra). ‖X‖_F = sqrt(Σσ_i²). tol never goes below float64's own singularity threshold
    max(N, d)·eps64·σ_1 (where κ is ``inf``, :func:`kappa_from_sigma`): it is u‖X‖_F for every dtype but
    float64 (for float32 the threshold is the larger only past max(N, d) ≈ 3e8), and a numerically singular
    matrix is always flagged.
    """
    scaled, e = rescaled_spectrum(sigma)  # σ² of σ near 1e308 (or 1e-200) would leave float64's range
    rounding = machine_eps(dtype) / 2 * scaled.square().sum(-1).sqrt()
    tol = torch.maximum(rounding, max(shape) * EPS64 * scaled[..., 0])
    return tol if e is None else ldexp(tol, e)


@dataclass(frozen=True)
class SpectrumSummary:
    """Everything one SVD of a batch tells (docs/math.md#spectra). Tensors are over the leading (sample)
    dims."""

    sigma: torch.Tensor  # (..., k) descending float64 (floors decided by the Gram path: σ below tol is noise)
    kappa: torch.Tensor  # (...,) σ_1/σ_k, inf where numerically singular in float64 (a floor: see `reported`)
    numerical_rank: torch.Tensor  # (...,) int64: count of σ_i > tol
    below_precision: torch.Tensor  # (...,) bool: σ_k ≤ tol, κ cannot be resolved from the captured data
    tolerance: torch.Tensor  # (...,) tol = eps(capture dtype)/2·‖X‖_F (see precision_tolerance)
    capture_dtype: str  # the dtype the matrix was captured in, e.g. "float32"

    @property
    def sigma_max(self) -> torch.Tensor:
        return self.sigma[..., 0]

    @property
    def sigma_min(self) -> torch.Tensor:
        return self.sigma[..., -1]

    @property
    def reported(self) -> torch.Tensor:
        """(...,) the κ to report: the measurement σ_1/σ_k, or where ``below_precision`` the floor σ_1/tol
        (κ ≥ that is all the captured data can tell; docs/math.md#spectra). ``inf`` only for a zero matrix."""
        return torch.where(self.below_precision, floor_kappa(self.sigma_max, self.tolerance), self.kappa)


def floor_kappa(sigma_max: torch.Tensor, tol: torch.Tensor) -> torch.Tensor:
    """The floor κ ≥ σ_1/tol of a matrix whose σ_k ≤ tol; ``inf`` where tol is 0 (a zero matrix)."""
    return guarded_ratio(sigma_max, tol, tol > 0, torch.inf)


def gram_decides_floors(capture_dtype: torch.dtype | str, shape: tuple[int, int]) -> bool:
    """Whether the Gram path can ever certify σ_k ≤ tol for this capture dtype and matrix shape: tol² =
    u²·‖X‖_F² must exceed the Gram error δ (:func:`gram_error`). True for bf16 and fp16, False for float32
    and float64 (there a Gram attempt on a matrix expected below resolution would be thrown away)."""
    u = machine_eps(capture_dtype) / 2
    return u * u > 2 * GRAM_ERROR * math.sqrt(max(shape)) * EPS64  # δ below half of tol²: room to decide


def _resolved_spectrum(
    x: torch.Tensor, capture_dtype: torch.dtype | str, exact_spectrum: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Spectra by the Gram path where :func:`gram_verdict` says it settles κ or the floor, SVD elsewhere
    (and for floors too where ``exact_spectrum``); and the mask of floors the Gram path decided."""
    shape = (x.shape[-2], x.shape[-1])
    ev = batched(lambda m: torch.linalg.eigvalsh(gram_matrix(m)), x).flip(-1)  # descending σ̂²
    sigma = ev.clamp_min(0).sqrt()
    measured, floor = gram_verdict(ev, precision_tolerance(sigma, shape, capture_dtype), shape)
    redo = ~measured & (~floor | exact_spectrum)
    if bool(redo.any()):
        sigma[redo] = svdvals(x[redo], groups_where(redo))
    return sigma, floor & ~redo


def summarize(
    X: Tensorish,
    capture_dtype: torch.dtype | str | None = None,
    *,
    method: Method = "svd",
    floors: bool = False,
    exact_spectrum: bool = True,
) -> SpectrumSummary:
    """Spectrum, κ, numerical rank and the below-precision flag of each matrix from one float64 SVD.

    ``capture_dtype`` is the dtype the activations were stored in (default: X's own float dtype; float64 for
    integers and arrays). A sample is *below precision* when σ_k ≤ tol = eps(capture_dtype)/2·‖X‖_F
    (:func:`precision_tolerance`): storing X in that dtype may have moved σ_k by as much, so its κ cannot be
    told from rounding noise and must not be reported as trustworthy (report
    :attr:`SpectrumSummary.reported`, the floor). The numerical rank counts σ_i > tol.

    ``method="auto"`` takes the spectrum from the float64 Gram matrix where its κ is at most
    :data:`GRAM_MAX_KAPPA` (every σ_i accurate to ≈ 1e-11 relative then, so rank and flag are SVD's) and
    from SVD for every other matrix — the fast path for the analysis commands. With ``floors=True`` (the
    analysis commands) it keeps the Gram answer wherever :func:`gram_verdict` says it is a measurement within
    :data:`MEASURE_RTOL` of SVD's or certainly a floor, and spends no SVD on such a floor unless
    ``exact_spectrum`` (the caller reports its whole spectrum); the κ field of a Gram-decided floor is then
    the floor itself.
    """
    if capture_dtype is None:
        floating = isinstance(X, torch.Tensor) and X.dtype.is_floating_point  # integers are stored exactly
        capture_dtype = X.dtype if floating else torch.float64
    x, e = upcast(X)  # κ, rank and the flag are scale-invariant; σ and tol are scaled back
    shape = (x.shape[-2], x.shape[-1])
    gram_floor = None
    if floors and method == "auto":
        sigma, gram_floor = _resolved_spectrum(x, capture_dtype, exact_spectrum)
    else:
        sigma = _spectrum(x, method)
    tol = precision_tolerance(sigma, shape, capture_dtype)
    rank = (sigma > tol.unsqueeze(-1)).sum(-1)
    kappa = kappa_from_sigma(sigma, shape)
    if gram_floor is not None and bool(gram_floor.any()):
        kappa = torch.where(gram_floor, floor_kappa(sigma[..., 0], tol), kappa)  # not σ̂_1/noise
    name = capture_dtype if isinstance(capture_dtype, str) else str(capture_dtype).removeprefix("torch.")
    return SpectrumSummary(
        sigma=sigma if e is None else ldexp(sigma, e[..., None]),
        kappa=kappa,
        numerical_rank=rank,
        below_precision=sigma[..., -1] <= tol,
        tolerance=tol if e is None else ldexp(tol, e),
        capture_dtype=name,
    )


def numerical_rank(X: Tensorish, capture_dtype: torch.dtype | str | None = None) -> torch.Tensor:
    """Count of σ_i > eps(capture_dtype)/2·‖X‖_F per matrix (int64); see :func:`summarize`."""
    return summarize(X, capture_dtype).numerical_rank


def below_precision(X: Tensorish, capture_dtype: torch.dtype | str | None = None) -> torch.Tensor:
    """True where σ_k ≤ eps(capture_dtype)/2·‖X‖_F; see :func:`summarize`."""
    return summarize(X, capture_dtype).below_precision
