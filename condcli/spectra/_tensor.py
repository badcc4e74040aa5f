"""Input handling shared by the spectral functions: one place that turns user data into float64 batches."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from condcli.errors import InputError, NonFiniteInputError
from condcli.spectra.strategies import run_grouped, thread_map

Tensorish = torch.Tensor | np.ndarray[Any, Any]

EPS64 = float(torch.finfo(torch.float64).eps)


# Matrices whose largest |entry| lies in [2^-SAFE_EXPONENT, 2^SAFE_EXPONENT] go to the linear algebra as they
# are. Others (entries near 1e308 overflow the Gram matrix and ‖X‖_F; subnormal ones lose digits there) are
# first scaled by a power of two, which is exact, and κ, ranks and ratios are scale-invariant (σ is scaled
# back). The band holds everything float32/bf16/fp16 can store (|x| < 2^128, subnormals > 2^-150), so a
# captured activation is never rescaled and its results are bitwise those of the plain path; inside it the
# Gram matrix (≤ N·d·2^512) and λ² stay far from float64's limits.
SAFE_EXPONENT = 256


def _numeric_array(X: Any) -> np.ndarray[Any, Any]:
    """``X`` (array-like) as a numpy array torch can take: numeric, no negative strides (``A[::-1]``)."""
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as e:  # ragged nested lists
        raise InputError(
            f"expected a matrix of numbers, got {type(X).__name__} ({e})",
            "pass a tensor or array (..., N, d)",
        ) from None
    if arr.dtype.kind not in "biufc":
        raise InputError(
            f"expected a matrix of numbers, got an array of {arr.dtype}", "pass a float tensor or array"
        )
    return arr if all(s >= 0 for s in arr.strides) else np.ascontiguousarray(arr)


def as_float64(X: Tensorish, *, min_ndim: int = 2) -> torch.Tensor:
    """``X`` as a float64 tensor on its own device (exact upcast), validated (:func:`validated`)."""
    return validated(X, min_ndim=min_ndim).detach().to(torch.float64)


def validated(X: Tensorish, *, min_ndim: int = 2) -> torch.Tensor:
    """``X`` as a tensor in its own dtype (on the CPU where it was on MPS), validated.

    Raises :class:`InputError` for complex, empty or non-numeric matrices and :class:`NonFiniteInputError`,
    naming the first offending sample along the flattened leading dimensions, for NaN/Inf entries: a spectrum
    of a non-finite matrix is meaningless, so condcli refuses rather than returning a number.
    """
    t = torch.from_numpy(_numeric_array(X)) if not isinstance(X, torch.Tensor) else X
    if t.is_complex():
        raise InputError("complex matrices are not supported", "pass the real embedding matrix")
    if t.ndim < min_ndim:
        raise InputError(
            f"expected a matrix of shape (..., N, d), got shape {tuple(t.shape)}",
            "reshape a single token row to (1, d)",
        )
    if min_ndim >= 2 and (t.shape[-1] == 0 or t.shape[-2] == 0):
        raise InputError(f"empty matrix of shape {tuple(t.shape)}", "give at least one token and one dim")
    if t.device.type == "mps":  # MPS has no float64
        t = t.cpu()
    # checked on the captured dtype: the upcast is exact, so the verdict is the same, at half the bytes
    check_finite(t)
    return t


def pow2_exponents(magnitude: torch.Tensor) -> torch.Tensor:
    """Per element, the int64 e with magnitude·2^-e in [0.5, 1) where ``magnitude`` lies outside
    [2^-SAFE_EXPONENT, 2^SAFE_EXPONENT] (and is not 0), else 0: scaling by 2^-e brings it into the band."""
    _, e = torch.frexp(magnitude)
    bound = 2.0**SAFE_EXPONENT
    outside = (magnitude > bound) | ((magnitude < 1 / bound) & (magnitude > 0))
    return torch.where(outside, e.to(torch.int64), torch.zeros_like(e, dtype=torch.int64))


def ldexp(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """x·2^e (``e`` int64, broadcast against x), exact wherever the result is a normal float. Done in two
    halves, so that 2^e itself never overflows (a subnormal scaled up by 2^1074 is a finite number)."""
    e = e.to(x.device)
    half = torch.div(e, 2, rounding_mode="floor")
    return x * torch.pow(2.0, half.to(x.dtype)) * torch.pow(2.0, (e - half).to(x.dtype))


def rescaled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``x`` (..., N, d) float64 with each matrix whose largest |entry| is outside the safe band scaled by a
    power of two into it, and the per-matrix exponents e (``x`` = result·2^e). Where no matrix needs it, ``x``
    itself and None: the plain path, untouched. Each matrix's scale depends on that matrix alone."""
    # the largest |entry| without a copy of |x| (ViT-B's 36 full projections: 170 MB of float64)
    e = pow2_exponents(torch.linalg.vector_norm(x, ord=math.inf, dim=(-2, -1)))
    if not bool(e.any()):
        return x, None
    return ldexp(x, -e[..., None, None]), e


def rescaled_spectrum(sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Like :func:`rescaled` for descending spectra (..., k), scaled by their largest value."""
    e = pow2_exponents(sigma.abs().amax(dim=-1)) if sigma.shape[-1] else torch.zeros(0, dtype=torch.int64)
    if not bool(e.any()):
        return sigma, None
    return ldexp(sigma, -e[..., None]), e


def guarded_ratio(num: torch.Tensor, den: torch.Tensor, valid: torch.Tensor, fill: float) -> torch.Tensor:
    """num/den where ``valid``, ``fill`` elsewhere — without ever dividing by the invalid denominators."""
    ratio = num / torch.where(valid, den, torch.ones_like(den))
    return torch.where(valid, ratio, torch.full_like(ratio, fill))


def per_matrix(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``fn`` applied to each (N, d) matrix of ``x`` (..., N, d) on its own, results stacked back.

    For ``fn`` that takes one matrix only; a ``torch.linalg`` call that takes a stack goes through
    :func:`batched`. On CPU the matrices are spread over torch's threads (LAPACK on one
    small matrix uses about one core: measured 1.9× faster on 2 cores for 197×197 SVDs); each is still its
    own call, so results are bitwise those of the sequential loop, whatever the batch split
    (docs/math.md#aggregation).
    """
    lead = x.shape[:-2]
    flat = x.reshape(-1, *x.shape[-2:])
    if flat.shape[0] == 0:
        out = fn(flat)
    elif flat.device.type == "cpu":
        out = torch.stack(thread_map(fn, list(flat.unbind(0))))
    else:
        out = torch.stack([fn(m) for m in flat.unbind(0)])
    return out.reshape(tuple(lead) + tuple(out.shape[1:]))


def batched(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``fn`` — a batchable op: one matrix or a stack in, e.g. ``torch.linalg.svdvals`` — over every matrix
    of ``x`` (..., N, d), run by the linear-algebra strategy of x's device
    (:mod:`condcli.spectra.strategies`). The first leading dimension is the sample axis: a batched call never
    mixes two of its indices, so results do not depend on how samples are batched
    (docs/math.md#aggregation)."""
    return run_grouped(fn, x)


def svdvals(x: torch.Tensor, groups: list[slice] | None = None) -> torch.Tensor:
    """Singular values of each matrix of ``x`` (..., N, d), descending (:func:`batched`); ``groups`` over the
    flattened matrices replace the default one-per-sample grouping (see :func:`groups_where`)."""
    return run_grouped(torch.linalg.svdvals, x, groups)


def groups_where(mask: torch.Tensor) -> list[slice] | None:
    """The groups of ``x[mask]`` (``mask`` over x's leading dims): the selected matrices of each index of the
    first leading dimension (a sample) together, so that ``svdvals(x[mask], groups_where(mask))`` batches
    within a sample only and a sample's results do not depend on which other samples are in the batch. None
    (each selected matrix alone) where there is at most one matrix a sample."""
    if mask.ndim < 2:
        return None
    counts = mask.reshape(mask.shape[0], -1).sum(-1).tolist()
    starts = [0, *itertools.accumulate(int(c) for c in counts)]
    return [slice(a, b) for a, b in itertools.pairwise(starts) if b > a]


def check_finite(t: torch.Tensor) -> None:
    """Raise :class:`NonFiniteInputError` naming the first matrix of the batch that holds NaN/Inf."""
    if t.is_floating_point() and bool(torch.isfinite(t.sum())):  # a NaN/Inf entry makes the sum NaN/Inf
        return  # one pass, no mask (a finite sum is conclusive; an overflowing one is checked entry by entry)
    if t.ndim < 2:
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            raise NonFiniteInputError(0, int(bad.sum()), 1)
        return
    bad = (~torch.isfinite(t)).flatten(-2).sum(-1).reshape(-1)  # (samples,)
    if bool((bad > 0).any()):
        first = int(torch.nonzero(bad > 0)[0, 0])
        raise NonFiniteInputError(first, int(bad[first]), bad.numel())


def machine_eps(dtype: torch.dtype | str) -> float:
    """eps of a floating dtype given as a torch dtype or its name (``"float32"``, ``"bfloat16"``…)."""
    if isinstance(dtype, str):
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype) or not resolved.is_floating_point:
            raise InputError(f"unknown floating dtype {dtype!r}", "use float64, float32, float16 or bfloat16")
        dtype = resolved
    if not dtype.is_floating_point:
        raise InputError(f"{dtype} is not a floating dtype", "use float64, float32, float16 or bfloat16")
    return float(torch.finfo(dtype).eps)
