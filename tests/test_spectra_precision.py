"""The below-precision flag (docs/math.md#spectra): tol = u·‖X‖_F, u = eps(capture dtype)/2, against float64
NumPy SVDs.

By Weyl's inequality rounding X to the capture dtype moves no σ_i by more than tol; these tests check that
claim on random matrices, that a well-conditioned bf16 capture is not flagged whatever its size, and that
the flag flips exactly at tol.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from condcli import spectra
from tests.helpers import DTYPE_EPS, geometric_sigma, np_sigma, np_tol, prescribed

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def stored(X: np.ndarray, dtype: str) -> torch.Tensor:
    """X as a capture in ``dtype`` would hold it (round to nearest)."""
    return torch.from_numpy(X).to(DTYPES[dtype])


@pytest.mark.parametrize("shape", [(64, 256), (256, 64), (197, 768)])
def test_a_bf16_matrix_of_kappa_20_is_not_flagged_at_any_width(shape: tuple[int, int]) -> None:
    N, d = shape
    k = min(N, d)
    X = stored(prescribed(np.random.default_rng(k), N, d, geometric_sigma(k, 20.0)), "bfloat16")
    s = spectra.summarize(X)
    assert s.capture_dtype == "bfloat16"
    x64 = X.double().numpy()
    sigma, tol = np_sigma(x64), float(np_tol(x64, DTYPE_EPS["bfloat16"]))
    np.testing.assert_allclose(float(s.tolerance), tol, rtol=1e-12)
    assert sigma[-1] > tol and not bool(s.below_precision) and int(s.numerical_rank) == k
    np.testing.assert_allclose(float(s.kappa), sigma[0] / sigma[-1], rtol=1e-10)
    # NumPy's matrix_rank convention, max(N, d)·eps·σ_1, would call this matrix rank 0
    assert max(N, d) * DTYPE_EPS["bfloat16"] * sigma[0] > sigma[0] > sigma[-1]


@pytest.mark.parametrize("shape", [(12, 40), (40, 12)])
def test_the_float32_flag_flips_at_half_eps_times_the_frobenius_norm(shape: tuple[int, int]) -> None:
    N, d = shape
    k = min(N, d)
    eps = DTYPE_EPS["float32"]
    edge = 0.5 * eps * np.sqrt(k - 1)  # u·‖X‖_F for σ = (1, …, 1, σ_k) up to σ_k² ≈ 1e-13
    for factor, flagged in ((0.999, True), (1.001, False)):
        X = prescribed(np.random.default_rng(9), N, d, np.r_[np.ones(k - 1), factor * edge], batch=(2,))
        tol = np_tol(X, eps)
        assert ((np_sigma(X)[:, -1] <= tol) == flagged).all()  # the reference agrees it is that side
        s = spectra.summarize(X, "float32")
        np.testing.assert_allclose(s.tolerance.numpy(), tol, rtol=1e-12)
        assert s.below_precision.tolist() == [flagged] * 2
        assert s.numerical_rank.tolist() == [k - 1 if flagged else k] * 2
        assert spectra.below_precision(X, torch.float32).tolist() == [flagged] * 2


def _random_matrices(rng: np.random.Generator) -> list[np.ndarray]:
    gauss = rng.standard_normal((48, 96))
    spiky = rng.standard_normal((100, 30)) * np.logspace(0, -4, 30)  # columns from 1 down to 1e-4
    return [
        gauss,
        gauss.T * 7.5,
        spiky,
        prescribed(rng, 60, 60, geometric_sigma(60, 1e3)),
        prescribed(rng, 20, 128, np.r_[np.ones(19), 1e-6]),  # one direction far below every dtype's tol
        rng.standard_normal((5, 1)) @ rng.standard_normal((1, 33)) + 1e-3 * rng.standard_normal((5, 33)),
    ]


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_rounding_to_the_capture_dtype_moves_no_sigma_by_more_than_tol(dtype: str) -> None:
    """Weyl: fl(X) = X + E with ‖E‖_2 ≤ ‖E‖_F ≤ u‖fl(X)‖_F, so |σ_i(fl(X)) − σ_i(X)| ≤ tol of the capture."""
    rng = np.random.default_rng(11)
    u = DTYPE_EPS[dtype] / 2
    for X in _random_matrices(rng):
        held = stored(X, dtype)
        x64 = held.double().numpy()
        E = x64 - X
        assert np.abs(E).max() > 0  # the rounding did happen
        norm = np.linalg.norm(x64, "fro")
        assert np.linalg.norm(E, 2) <= np.linalg.norm(E, "fro") <= u * norm
        moved = np.abs(np_sigma(x64) - np_sigma(X)).max()
        tol = float(spectra.summarize(held).tolerance)
        np.testing.assert_allclose(tol, u * norm, rtol=1e-12)
        assert moved <= tol, f"{dtype} {X.shape}: σ moved {moved:.3g} > tol {tol:.3g}"
