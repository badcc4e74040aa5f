"""Theorem 4.4's correction, the Weyl bound vs the supplement's estimate, and μ (docs/math.md#spectra to
#layers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.errors import InputError
from tests.helpers import geometric_sigma, np_kappa, np_shifted_kappa, np_sigma, prescribed

SHAPES = [(5, 9), (9, 5), (7, 7), (1, 6), (197, 64)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e9])
def test_corrected_kappa_formula_and_explicit_C(shape: tuple[int, int], kappa: float) -> None:
    N, d = shape
    rng = np.random.default_rng(20)
    X = prescribed(rng, N, d, geometric_sigma(min(N, d), kappa), batch=(2,))
    s = np_sigma(X)
    formula = 2 * s[..., 0] / (s[..., 0] + s[..., -1])
    got = spectra.corrected_condition_number(X).numpy()
    np.testing.assert_allclose(got, formula, rtol=1e-12)
    assert (got <= 2 + 1e-12).all()
    C = spectra.correction(X).numpy()
    assert C.shape == X.shape
    # C = σ_1·U_k V_kᵀ: all k singular values equal σ_1; X + C through an independent SVD gives the formula.
    np.testing.assert_allclose(np_sigma(C), np.repeat(s[..., :1], min(N, d), -1), rtol=1e-12)
    np.testing.assert_allclose(np_kappa(X + C), formula, rtol=1e-12)


def test_corrected_kappa_of_rank_deficient_is_2_and_of_zero_is_inf() -> None:
    low = np.outer(np.arange(1.0, 6.0), np.arange(1.0, 9.0))  # rank 1
    assert float(spectra.corrected_condition_number(low)) == pytest.approx(2.0, rel=1e-12)
    assert float(spectra.corrected_condition_number(np.zeros((3, 4)))) == np.inf


def test_identity_k_and_shift() -> None:
    eye = spectra.identity_k(3, 5).numpy()
    np.testing.assert_array_equal(eye, np.eye(3, 5))
    np.testing.assert_array_equal(spectra.identity_k(5, 3).numpy(), np.eye(5, 3))
    X = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(spectra.shift(X, 10.0).numpy(), X + 10.0 * np.eye(3, 4))


def _matrices() -> list[np.ndarray]:
    rng = np.random.default_rng(21)
    return [
        rng.standard_normal((20, 40)),
        rng.standard_normal((40, 20)) * 3,
        prescribed(rng, 30, 30, geometric_sigma(30, 1e6)),
        -7.0 * np.eye(10, 16) + 0.01 * rng.standard_normal((10, 16)),  # adversarial: anti-aligned with I_k
        np.diag([-4.0, 1e-3]),
    ]


@pytest.mark.parametrize("X", _matrices())
def test_weyl_bound_holds_at_every_lambda_and_is_inf_below_sigma1(X: np.ndarray) -> None:
    s1 = float(np_sigma(X)[0])
    lams = np.r_[np.linspace(0.1, 3 * s1, 40), s1 * (1 + 1e-9), s1 * np.array([4.0, 10.0, 100.0])]
    bound = spectra.weyl_bound(s1, lams).numpy()
    true = np.array([np_shifted_kappa(X, lam) for lam in lams])
    above = lams > s1
    assert (true[above] <= bound[above] * (1 + 1e-12)).all()
    assert np.isinf(bound[~above]).all()
    np.testing.assert_allclose(bound[above], (s1 + lams[above]) / (lams[above] - s1), rtol=1e-15)


@pytest.mark.parametrize("target", [1.5, 2.0, 10.0])
def test_weyl_lambda_for_target_is_the_smallest_and_guarantees_the_target(target: float) -> None:
    for X in _matrices():
        s1 = float(np_sigma(X)[0])
        lam = float(spectra.weyl_lambda_for_target(s1, target))
        assert float(spectra.weyl_bound(s1, lam)) == pytest.approx(target, rel=1e-12)
        assert float(spectra.weyl_bound(s1, lam * (1 - 1e-6))) > target
        assert np_shifted_kappa(X, lam) <= target * (1 + 1e-12)


def test_supplement_estimate_is_not_a_bound() -> None:
    """The supplement's (σ_1+λ)/(λ−σ_k) undershoots: X = diag(−a, ε) makes X + aI singular."""
    a, eps = 4.0, 1e-3
    X = np.diag([-a, eps])
    s = np_sigma(X)
    est = float(spectra.supplement_estimate(s[0], s[-1], a))
    assert est == pytest.approx((a + a) / (a - eps), rel=1e-15)
    assert np.isfinite(est) and np_shifted_kappa(X, a) == np.inf
    # Close to the singular point the true κ exceeds the estimate by orders of magnitude.
    assert np_shifted_kappa(X, a + 1e-3) > 100 * float(spectra.supplement_estimate(s[0], s[-1], a + 1e-3))


def test_supplement_estimate_and_its_lambda_for_target() -> None:
    s1, sk = np.array([10.0, 3.0]), np.array([0.01, 0.5])
    lams = np.array([0.005, 1.0, 20.0])
    est = spectra.supplement_estimate(s1, sk, lams).numpy()
    assert est.shape == (2, 3)
    ref = (s1[:, None] + lams) / (lams - sk[:, None])
    ref[lams <= sk[:, None]] = np.inf
    np.testing.assert_allclose(est, ref, rtol=1e-15)
    lam = spectra.supplement_lambda_for_target(s1, sk, 2.0).numpy()
    np.testing.assert_allclose((s1 + lam) / (lam - sk), 2.0, rtol=1e-12)
    with pytest.raises(InputError, match="target"):
        spectra.weyl_lambda_for_target(1.0, 1.0)


def test_mu_factors_and_proposition_4_2_on_real_linear_attention() -> None:
    rng = np.random.default_rng(22)
    N, d = 12, 16
    X = rng.standard_normal((N, d))
    Wq, Wk, Wv = (rng.standard_normal((d, d)) for _ in range(3))
    kq, kk, kv, kx = (float(np_kappa(m)) for m in (Wq, Wk, Wv, X))
    mu = float(spectra.mu_linear_attention(kq, kk, kv, kx))
    assert mu == pytest.approx(kq * kk * kv * kx**3, rel=1e-14)
    LA = X @ Wq @ Wk.T @ X.T @ X @ Wv  # linear attention, N×d, full rank
    assert np_kappa(LA) <= mu
    P = np.exp(X @ Wq @ Wk.T @ X.T / np.sqrt(d))
    P /= P.sum(-1, keepdims=True)
    kp = float(np_kappa(P))
    assert float(spectra.mu_softmax_attention(kp, kx, kv)) == pytest.approx(kp * kx * kv, rel=1e-14)


def test_mu_propagates_inf_and_rejects_nonsense_factors() -> None:
    assert float(spectra.mu_linear_attention(2.0, np.inf, 1.0, 3.0)) == np.inf
    got = spectra.mu_softmax_attention(torch.tensor([1.0, np.inf]), 2.0, 3.0)
    assert got.tolist() == [6.0, np.inf]
    with pytest.raises(InputError):
        spectra.mu_linear_attention(0.5, 1.0, 1.0, 1.0)
    with pytest.raises(InputError):
        spectra.mu_softmax_attention(np.nan, 1.0, 1.0)
