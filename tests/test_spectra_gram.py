"""The fast Gram paths against float64 SVD: exact where trusted, and the SVD fallback where not
(docs/math.md#spectra)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.spectra.core import GRAM_MAX_KAPPA, gram_eigen_spectrum, kappa_from_sigma
from condcli.spectra.shift import shifted_kappa_gram
from tests.helpers import EPS, geometric_sigma, np_kappa, np_shifted_kappa, prescribed

SHAPES = [(197, 768), (768, 197), (40, 40), (3, 50)]
LAMBDAS = np.r_[0.0, np.logspace(-6, np.log10(20), 12), -0.5]


def _relerr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    both_inf = np.isinf(a) & np.isinf(b)
    with np.errstate(invalid="ignore"):
        return np.where(both_inf, 0.0, np.abs(a - b) / b)


@pytest.mark.parametrize("shape", SHAPES)
def test_gram_kappa_is_exact_to_1e10_wherever_it_is_trusted(shape: tuple[int, int]) -> None:
    N, d = shape
    rng = np.random.default_rng(10)
    for kappa in [1.0, 10.0, 100.0, GRAM_MAX_KAPPA]:
        X = prescribed(rng, N, d, geometric_sigma(min(N, d), kappa), batch=(2,))
        est = kappa_from_sigma(gram_eigen_spectrum(torch.from_numpy(X)), (N, d)).numpy()
        assert _relerr(est, np_kappa(X)).max() <= 1e-10


@pytest.mark.parametrize("shape", SHAPES)
def test_condition_number_auto_agrees_with_svd_up_to_1e6_and_falls_back_above(shape: tuple[int, int]) -> None:
    N, d = shape
    rng = np.random.default_rng(11)
    kappas = [1.0, 50.0, 1e3, 1e4, 1e6, 1e9]
    X = np.stack([prescribed(rng, N, d, geometric_sigma(min(N, d), k)) for k in kappas])
    got = spectra.condition_number(X).numpy()
    ref = np_kappa(X)
    err = _relerr(got, ref)
    assert err[:5].max() <= 1e-10, err
    assert err[5] <= 100 * EPS * 1e9  # κ = 1e9: SVD's own accuracy, ~eps·κ
    raw = kappa_from_sigma(gram_eigen_spectrum(torch.from_numpy(X)), (N, d)).numpy()
    assert _relerr(raw, ref)[4] > 1e-10, (
        "at κ = 1e6 the raw Gram answer is off: the fallback is what saves it"
    )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e6])
def test_sweep_matches_per_lambda_svd(shape: tuple[int, int], kappa: float) -> None:
    N, d = shape
    rng = np.random.default_rng(12)
    X = prescribed(rng, N, d, geometric_sigma(min(N, d), kappa), batch=(3,))
    got = spectra.shifted_condition_number(X, LAMBDAS).numpy()  # (3, L)
    assert got.shape == (3, len(LAMBDAS))
    ref = np.stack([np_shifted_kappa(X, lam) for lam in LAMBDAS], axis=-1)
    err, modest = _relerr(got, ref), ref <= 1e6
    assert err[modest].max() <= 1e-10
    assert (err[~modest] <= 100 * EPS * ref[~modest]).all()  # above 1e6: SVD's own accuracy, ~eps·κ
    svd = spectra.shifted_condition_number(X, LAMBDAS, method="svd").numpy()
    assert (_relerr(svd, ref) <= 1e-10 + 100 * EPS * ref).all()


def test_sweep_scalar_and_single_matrix_shapes() -> None:
    rng = np.random.default_rng(13)
    X = rng.standard_normal((6, 9))
    assert spectra.shifted_condition_number(X, 2.0).shape == ()
    assert spectra.shifted_condition_number(X, [2.0]).shape == (1,)
    assert spectra.shifted_condition_number(np.stack([X, X]), torch.tensor(2.0)).shape == (2,)
    np.testing.assert_allclose(
        float(spectra.shifted_condition_number(X, 2.0)), np_shifted_kappa(X, 2.0), rtol=1e-12
    )


@pytest.mark.parametrize("shape", [(20, 40), (40, 20)])
def test_fallback_engages_where_the_gram_update_cancels(shape: tuple[int, int]) -> None:
    """X = −λ0·I_k + P: at λ = λ0 the Gram terms cancel to P Pᵀ ≪ λ0², which κ(X+λI) alone cannot see."""
    N, d = shape
    rng = np.random.default_rng(14)
    lam0 = 5.0
    X = -lam0 * np.eye(N, d) + 1e-5 * rng.standard_normal((N, d))
    lams = torch.tensor([1.0, lam0, 10.0], dtype=torch.float64)
    raw, ok = shifted_kappa_gram(torch.from_numpy(X), lams)
    ref = np.array([np_shifted_kappa(X, float(lam)) for lam in lams])
    assert ref[1] < 100, "the shifted matrix itself is well conditioned"
    assert not bool(ok[1]) and bool(ok[0]) and bool(ok[2])
    assert _relerr(raw.numpy(), ref)[1] > 1e-10, (
        "raw Gram breaks the 1e-10 contract there: this test can fail"
    )
    got = spectra.shifted_condition_number(X, lams).numpy()
    assert _relerr(got, ref).max() <= 1e-10


def test_sweep_reports_inf_for_an_exactly_singular_shift() -> None:
    X = -3.0 * np.eye(5, 8)
    X[0, 0] = 1.0  # X + 3I_k has a zero row
    got = spectra.shifted_condition_number(X, [2.0, 3.0])
    assert float(got[1]) == np.inf
    assert np.isfinite(float(got[0]))
    assert float(got[0]) == pytest.approx(float(np_shifted_kappa(X, 2.0)), rel=1e-12)


def test_bad_lambdas_are_clear_errors() -> None:
    from condcli.errors import InputError, UsageError

    X = np.eye(3, 4)
    with pytest.raises(InputError, match="finite"):
        spectra.shifted_condition_number(X, [1.0, np.nan])
    with pytest.raises(UsageError, match="empty"):
        spectra.shifted_condition_number(X, [])
    with pytest.raises(UsageError, match="1-D"):
        spectra.shifted_condition_number(X, [[1.0, 2.0]])
