"""Property tests: hypothesis-generated shapes and values against NumPy float64 SVD."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from condcli import spectra
from tests.helpers import EPS, np_kappa, np_shifted_kappa, np_sigma

dims = st.integers(1, 24)
values = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def batches(draw: st.DrawFn) -> np.ndarray:
    shape = (draw(st.integers(1, 3)), draw(dims), draw(dims))
    return draw(arrays(np.float64, shape, elements=values))


def _clear_of_threshold(X: np.ndarray, factor: float = 100.0) -> bool:
    """σ_k not within `factor` of the inf threshold, where two correct SVDs may decide differently."""
    s = np_sigma(X)
    tol = max(X.shape[-2:]) * EPS * s[..., 0]
    return bool(np.all((s[..., -1] > factor * tol) | (s[..., -1] == 0) | (s[..., -1] * factor < tol)))


@settings(max_examples=150, deadline=None)
@given(batches())
def test_singular_values_property(X: np.ndarray) -> None:
    got = spectra.singular_values(X).numpy()
    ref = np_sigma(X)
    scale = ref[..., :1] + 1e-300
    assert np.all(np.abs(got - ref) <= 1e-12 * scale)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_condition_number_property(X: np.ndarray) -> None:
    assume(_clear_of_threshold(X))
    got = spectra.condition_number(X).numpy()
    ref = np_kappa(X)
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    assert np.all(np.abs(got[fin] - ref[fin]) <= (1e-10 + 100 * EPS * ref[fin]) * ref[fin])


@settings(max_examples=100, deadline=None)
@given(batches(), st.lists(st.floats(-30, 30, allow_nan=False), min_size=1, max_size=5))
def test_shifted_condition_number_property(X: np.ndarray, lams: list[float]) -> None:
    for lam in lams:
        assume(_clear_of_threshold(X + lam * np.eye(*X.shape[-2:])))
    got = spectra.shifted_condition_number(X, lams).numpy()
    ref = np.stack([np_shifted_kappa(X, lam) for lam in lams], axis=-1)
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    assert np.all(np.abs(got[fin] - ref[fin]) <= (1e-10 + 100 * EPS * ref[fin]) * ref[fin])


@settings(max_examples=100, deadline=None)
@given(batches())
def test_weyl_bound_and_correction_property(X: np.ndarray) -> None:
    s = np_sigma(X)
    assume(np.all(s[..., 0] > 0))
    # X + C must be representable for NumPy's reference: with σ_1 in float64's subnormal range (X of
    # 5e-324 entries, found by Hypothesis) the sum itself rounds to a few ulps and its κ means nothing
    assume(np.all(s[..., 0] > 1e-290))
    corrected = spectra.corrected_condition_number(X).numpy()
    np.testing.assert_allclose(corrected, 2 * s[..., 0] / (s[..., 0] + s[..., -1]), rtol=1e-12)
    C = spectra.correction(X).numpy()
    np.testing.assert_allclose(np_kappa(X + C), corrected, rtol=1e-9)
    for factor in (1.01, 2.0, 10.0):
        lam = s[..., 0] * factor  # (B,) one λ > σ_1 per sample
        bound = spectra.weyl_bound(torch.from_numpy(s[..., 0]), 0.0).numpy()  # λ = 0 < σ_1: no bound
        assert np.isinf(bound).all()
        for b in range(X.shape[0]):
            true = np_shifted_kappa(X[b], lam[b])
            assert true <= float(spectra.weyl_bound(s[b, 0], lam[b])) * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(batches(), st.integers(1, 3))
def test_aggregate_split_invariance_property(X: np.ndarray, batch: int) -> None:
    for fn in (spectra.condition_number, lambda x: spectra.shifted_condition_number(x, [0.5, 10.0])):
        whole, split = spectra.ScalarStream(), spectra.ScalarStream()
        whole.extend(fn(X))
        for i in range(0, len(X), batch):
            split.extend(fn(X[i : i + batch]))
        assert whole.result() == split.result()
