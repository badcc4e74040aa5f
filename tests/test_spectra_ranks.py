"""Effective rank, stable rank and rank-collapse residual against their docs/math.md#ranks formulas in
NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from condcli import spectra
from tests.helpers import np_sigma


def np_erank(X: np.ndarray) -> float:
    s = np_sigma(X)
    p = s / s.sum() + 1e-7
    return float(np.exp(-(p * np.log(p)).sum()))


@pytest.mark.parametrize("shape", [(5, 9), (9, 5), (1, 4), (64, 32)])
def test_rank_measures_match_numpy(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(30)
    X = rng.standard_normal((3, *shape)) + 0.5
    np.testing.assert_allclose(spectra.effective_rank(X).numpy(), [np_erank(x) for x in X], rtol=1e-12)
    stable = [np.linalg.norm(x, "fro") ** 2 / np.linalg.norm(x, 2) ** 2 for x in X]
    np.testing.assert_allclose(spectra.stable_rank(X).numpy(), stable, rtol=1e-12)
    resid = [np.linalg.norm(x - x.mean(0)) / np.linalg.norm(x) for x in X]
    np.testing.assert_allclose(spectra.collapse_residual(X).numpy(), resid, rtol=1e-12)


def test_known_values() -> None:
    eye = np.eye(6, 10)
    assert float(spectra.effective_rank(eye)) == pytest.approx(6.0, rel=1e-5)  # the +1e-7 perturbs slightly
    assert float(spectra.stable_rank(eye)) == pytest.approx(6.0, rel=1e-14)
    rank1 = np.outer(np.arange(1.0, 5.0), np.ones(7))
    assert float(spectra.effective_rank(rank1)) == pytest.approx(1.0, abs=1e-5)
    assert float(spectra.stable_rank(rank1)) == pytest.approx(1.0, rel=1e-12)
    same_tokens = np.tile(np.arange(5.0), (8, 1))  # all rows equal: fully collapsed
    assert float(spectra.collapse_residual(same_tokens)) == pytest.approx(0.0, abs=1e-15)
    zero = np.zeros((3, 4))
    assert [
        float(f(zero)) for f in (spectra.effective_rank, spectra.stable_rank, spectra.collapse_residual)
    ] == [
        0.0,
        0.0,
        0.0,
    ]


def test_spectrum_variants_agree_with_matrix_variants() -> None:
    rng = np.random.default_rng(31)
    X = rng.standard_normal((4, 7, 11))
    s = spectra.singular_values(X)
    assert spectra.effective_rank_of_spectrum(s).tolist() == spectra.effective_rank(X).tolist()
    assert spectra.stable_rank_of_spectrum(s).tolist() == spectra.stable_rank(X).tolist()
