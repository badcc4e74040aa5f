"""Bounds on κ(X + λI_k) and the attention-conditioning bounds μ (docs/math.md#spectra, #layers).

A note on the supplement's Theorem B.1. Its step (11), σ_k(X + λI_k) ≥ λ − σ_k(X), is not a Weyl
inequality and fails in general: for X = diag(−a, ε), X + aI is singular, yet (σ_1+λ)/(λ−σ_k) is finite at
λ = a. Weyl's inequality |σ_i(A+B) − σ_i(A)| ≤ σ_1(B) with A = λI_k, B = X gives
σ_k(X + λI_k) ≥ λ − σ_1(X), hence the bound condcli reports as *the* Weyl bound:

    κ(X + λI_k) ≤ (σ_1 + λ) / (λ − σ_1)   for λ > σ_1.

The supplement's expression is kept as :func:`supplement_estimate`, labelled as an estimate, because users
will want to compare with the paper; it is never presented as a guarantee.
"""

from __future__ import annotations

import math

import torch

from condcli.errors import InputError
from condcli.spectra._tensor import guarded_ratio, ldexp, pow2_exponents

ArrayLike = torch.Tensor | float


def _f64(v: ArrayLike, name: str) -> torch.Tensor:
    try:
        t = torch.as_tensor(v, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise InputError(f"{name} must be a number or a tensor of numbers, got {v!r}", "e.g. 10.0") from None
    return t


def _sigma(v: ArrayLike, name: str) -> torch.Tensor:
    """A singular value (or a tensor of them): finite and ≥ 0, else :class:`InputError` naming ``name``."""
    t = _f64(v, name)
    bad = ~torch.isfinite(t) | (t < 0)
    if bool(bad.any()):
        first = float(t[bad].reshape(-1)[0])
        raise InputError(
            f"{name} must be a finite singular value ≥ 0, got {first:g}", "pass σ from singular_values"
        )
    return t


def _lambdas(v: ArrayLike) -> torch.Tensor:
    """λ values: finite (a negative λ is a shift too; the bounds hold only for λ > σ_1)."""
    t = _f64(v, "lambdas")
    if not bool(torch.isfinite(t).all()):
        raise InputError("λ must be finite", "give finite λ values, e.g. lambdas=[1.0, 10.0]")
    return t


def _check_target(target: float) -> None:
    if not (math.isfinite(target) and target > 1):
        raise InputError(
            f"target κ must be a finite number > 1, got {target}", "κ ≥ 1 always; pick e.g. target=2"
        )


def _shift_ratio(sigma_max: torch.Tensor, floor: torch.Tensor, lambdas: torch.Tensor) -> torch.Tensor:
    """(σ_1 + λ)/(λ − floor) where λ > floor, ``inf`` elsewhere; (...,) × (L,) broadcast to (..., L).

    Scale-invariant: where a value is beyond the safe band (σ_1 + λ past 1.8e308, or subnormal) all three are
    scaled by one power of two first.
    """
    s1, fl, lam = sigma_max, floor, lambdas
    if lam.ndim:
        s1, fl = s1.unsqueeze(-1), fl.unsqueeze(-1)
    e = pow2_exponents(torch.maximum(torch.maximum(s1, fl), lam.abs()))
    if bool(e.any()):
        s1, fl, lam = (ldexp(t, -e) for t in (s1, fl, lam))
    return guarded_ratio(s1 + lam, lam - fl, lam > fl, torch.inf)


def weyl_bound(sigma_max: ArrayLike, lambdas: ArrayLike) -> torch.Tensor:
    """Guaranteed κ(X + λI_k) ≤ (σ_1 + λ)/(λ − σ_1) for λ > σ_1; ``inf`` (no bound) for λ ≤ σ_1.

    ``sigma_max`` (...,) and ``lambdas`` (L,) broadcast to (..., L); scalars give scalars. ``sigma_max`` must
    be finite and ≥ 0 and ``lambdas`` finite (:class:`InputError` otherwise).
    """
    s1 = _sigma(sigma_max, "sigma_max")
    return _shift_ratio(s1, s1, _lambdas(lambdas))


def weyl_lambda_for_target(sigma_max: ArrayLike, target: float) -> torch.Tensor:
    """Smallest λ at which :func:`weyl_bound` reaches ``target``: λ* = σ_1 (t + 1)/(t − 1)."""
    _check_target(target)
    return _sigma(sigma_max, "sigma_max") * (target + 1) / (target - 1)


def supplement_estimate(sigma_max: ArrayLike, sigma_min: ArrayLike, lambdas: ArrayLike) -> torch.Tensor:
    """The supplement's (σ_1 + λ)/(λ − σ_k) for λ > σ_k (``inf`` otherwise). An estimate, NOT a bound.

    It equals the true κ(X + λI_k) only for special X and can undershoot it arbitrarily (module docstring).
    """
    return _shift_ratio(_sigma(sigma_max, "sigma_max"), _sigma(sigma_min, "sigma_min"), _lambdas(lambdas))


def supplement_lambda_for_target(sigma_max: ArrayLike, sigma_min: ArrayLike, target: float) -> torch.Tensor:
    """Smallest λ at which :func:`supplement_estimate` reaches ``target``: (σ_1 + t σ_k)/(t − 1)."""
    _check_target(target)
    s1, sk = _sigma(sigma_max, "sigma_max"), _sigma(sigma_min, "sigma_min")
    return (s1 + target * sk) / (target - 1)


def _kappas(*factors: ArrayLike) -> list[torch.Tensor]:
    out = [_f64(f, "kappa") for f in factors]
    for f in out:
        if bool(torch.isnan(f).any()) or bool((f < 1).any()):
            raise InputError("condition numbers must be ≥ 1 (or inf)", "pass κ values from condition_number")
    return out


def mu_linear_attention(
    kappa_wq: ArrayLike, kappa_wk: ArrayLike, kappa_wv: ArrayLike, kappa_x: ArrayLike
) -> torch.Tensor:
    """μ(LA) = κ(W_Q) κ(W_K) κ(W_V) κ(X)³ (Proposition 4.2); ``inf`` if any factor is, or on overflow."""
    wq, wk, wv, x = _kappas(kappa_wq, kappa_wk, kappa_wv, kappa_x)
    return wq * wk * wv * x**3


def mu_softmax_attention(kappa_p: ArrayLike, kappa_x: ArrayLike, kappa_wv: ArrayLike) -> torch.Tensor:
    """μ(A) = κ(P) κ(X) κ(W_V) with P the attention probabilities; ``inf`` if any factor is."""
    p, x, wv = _kappas(kappa_p, kappa_x, kappa_wv)
    return p * x * wv
