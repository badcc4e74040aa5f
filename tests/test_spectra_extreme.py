"""The spectral API at the edges of float64: entries near 1e308 or subnormal, λ past 1.4e154, bad arguments.

κ, ranks and ratios are scale-invariant, so condcli scales such a matrix by a power of two first (exact).
References: float64 NumPy on the same matrix scaled back into the normal range by ``np.ldexp`` (exact, so it
is the very matrix condcli was given), and exact rational arithmetic for the bounds.
"""

from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.errors import InputError

RTOL = 1e-12


def _matrix(seed: int, shape: tuple[int, ...] = (6, 9)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _svd(a: np.ndarray) -> np.ndarray:
    return np.linalg.svd(a, compute_uv=False)


def _eye(n: int, d: int) -> np.ndarray:
    return np.eye(n, d)


# 2^1010 puts entries near 1e308 (σ_1 of the 6×9 matrix stays below float64's max); 2^-1060 makes every
# entry subnormal (stored with fewer digits: the reference is computed from the stored values, scaled up).
EXPONENTS = [1010, 700, -700, -1060]


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_kappa_of_a_scaled_matrix_is_numpys_kappa_of_the_same_matrix(exponent: int) -> None:
    X = np.ldexp(_matrix(0), exponent)
    A = np.ldexp(X, -exponent)  # exactly the stored matrix, in the normal range
    kappa = float(_svd(A)[0] / _svd(A)[-1])
    assert float(spectra.condition_number(X)) == pytest.approx(kappa, rel=RTOL)
    assert float(spectra.condition_number(X, method="svd")) == pytest.approx(kappa, rel=RTOL)
    summary = spectra.summarize(X)
    assert float(summary.kappa) == pytest.approx(kappa, rel=RTOL)
    assert not bool(summary.below_precision) and int(summary.numerical_rank) == 6
    s = _svd(A)
    assert float(spectra.corrected_condition_number(X)) == pytest.approx(2 * s[0] / (s[0] + s[-1]), rel=RTOL)
    assert float(spectra.stable_rank(X)) == pytest.approx(float((s**2).sum() / s[0] ** 2), rel=RTOL)
    p = s / s.sum() + 1e-7
    assert float(spectra.effective_rank(X)) == pytest.approx(float(np.exp(-(p * np.log(p)).sum())), rel=RTOL)
    resid = np.linalg.norm(A - A.mean(0, keepdims=True)) / np.linalg.norm(A)
    assert float(spectra.collapse_residual(X)) == pytest.approx(float(resid), rel=RTOL)


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_singular_values_and_tolerance_are_scaled_back(exponent: int) -> None:
    X = np.ldexp(_matrix(1), exponent)
    A = np.ldexp(X, -exponent)

    def close(got: torch.Tensor, ref: np.ndarray, rtol: float = RTOL) -> None:
        # σ of a subnormal matrix is itself subnormal: correct to its last place, 2^-1074
        np.testing.assert_allclose(got.numpy(), np.ldexp(ref, exponent), rtol=rtol, atol=2 * 2.0**-1074)

    close(spectra.singular_values(X), _svd(A))
    summary = spectra.summarize(X, "float32")
    close(summary.sigma, _svd(A))
    # docs/math.md#spectra: u·‖X‖_F
    close(summary.tolerance, np.float64(np.finfo(np.float32).eps / 2 * np.linalg.norm(A)))
    U, S, Vh = np.linalg.svd(A, full_matrices=False)
    C = S[0] * U @ Vh
    close(spectra.correction(X), C, rtol=1e-10)


def test_spectrum_functions_take_spectra_near_the_limits() -> None:
    s = np.array([3.0, 2.0, 0.5])
    for exponent in (1022, -1070):
        big = torch.from_numpy(np.ldexp(s, exponent))
        assert float(spectra.stable_rank_of_spectrum(big)) == pytest.approx((s**2).sum() / 9, rel=RTOL)
        assert float(spectra.corrected_kappa_from_sigma(big)) == pytest.approx(6 / 3.5, rel=RTOL)
        np.testing.assert_allclose(
            spectra.cumulative_spectrum(big).numpy(), np.cumsum(s) / s.sum(), rtol=RTOL
        )
        p = s / s.sum() + 1e-7
        erank = float(np.exp(-(p * np.log(p)).sum()))
        assert float(spectra.effective_rank_of_spectrum(big)) == pytest.approx(erank, rel=RTOL)


@pytest.mark.parametrize("lam", [1.5e154, 1e200, 1e308])
def test_a_huge_lambda_gives_kappa_one_like_numpy(lam: float) -> None:
    # X + λ·I_k rounds to λ·I_k in float64: NumPy's κ of the shifted matrix is 1 (the limit, to float64)
    A = _matrix(2)
    ref = np.linalg.cond(A + lam * _eye(6, 9))
    for method in ("auto", "svd"):
        got = spectra.shifted_condition_number(A, [1.0, lam], method=method).numpy()  # type: ignore[arg-type]
        assert got[1] == pytest.approx(ref, rel=RTOL)
        assert got[0] == pytest.approx(np.linalg.cond(A + _eye(6, 9)), rel=1e-10)


@pytest.mark.parametrize("exponent", [900, -900, -1060])
def test_shift_scales_x_and_lambda_together(exponent: int) -> None:
    X = np.ldexp(_matrix(3), exponent)
    A = np.ldexp(X, -exponent)
    mus = [0.0, 0.5, 3.0, 40.0]
    lams = [float(np.ldexp(mu, exponent)) for mu in mus]
    ref = [np.linalg.cond(A + mu * _eye(6, 9)) for mu in mus]
    for method in ("auto", "svd"):
        got = spectra.shifted_condition_number(X, lams, method=method).numpy()  # type: ignore[arg-type]
        np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_a_grid_mixing_scales_gives_each_lambda_its_own_answer() -> None:
    A = _matrix(4, (3, 5, 7))
    lams = [0.0, 2.0, 1e160, 1e300]
    got = spectra.shifted_condition_number(A, lams).numpy()
    ref = [[np.linalg.cond(a + lam * _eye(5, 7)) for lam in lams] for a in A]
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    # a sample's answer does not depend on the others in its batch
    alone = spectra.shifted_condition_number(A[1], lams).numpy()
    assert alone.tolist() == got[1].tolist()


def test_a_long_grid_is_taken_in_chunks_with_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    A = _matrix(5, (2, 6, 9))
    lams = np.linspace(0.0, 30.0, 17)
    shift_module = importlib.import_module("condcli.spectra.shift")  # the name `shift` is also a function
    monkeypatch.setattr(shift_module, "GRAM_GRID_BYTES", 8 * 6 * 6 * 3)  # 3 λ per chunk
    got = spectra.shifted_condition_number(A, lams).numpy()
    ref = [[np.linalg.cond(a + lam * _eye(6, 9)) for lam in lams] for a in A]
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_weyl_bound_refuses_what_is_not_a_singular_value_or_a_lambda() -> None:
    for sigma in (-1.0, float("nan"), float("inf"), torch.tensor([2.0, -0.5])):
        with pytest.raises(InputError, match="sigma_max"):
            spectra.weyl_bound(sigma, 2.0)
        with pytest.raises(InputError, match="sigma_max"):
            spectra.weyl_lambda_for_target(sigma, 2.0)
    for lam in (float("nan"), float("inf"), torch.tensor([1.0, float("nan")])):
        with pytest.raises(InputError, match="λ must be finite"):
            spectra.weyl_bound(1.0, lam)
        with pytest.raises(InputError, match="λ must be finite"):
            spectra.supplement_estimate(1.0, 0.5, lam)
    with pytest.raises(InputError, match="sigma_min"):
        spectra.supplement_estimate(1.0, -0.5, 2.0)
    with pytest.raises(InputError, match="sigma_min"):
        spectra.supplement_lambda_for_target(1.0, float("nan"), 2.0)
    for target in (float("inf"), float("nan"), 1.0):
        with pytest.raises(InputError, match="target"):
            spectra.weyl_lambda_for_target(1.0, target)
    with pytest.raises(InputError, match="sigma_max"):
        spectra.weyl_bound("big", 2.0)  # type: ignore[arg-type]


def test_weyl_bound_near_the_top_of_float64_is_exact_arithmetic() -> None:
    s1, lams = 1e308, [1.5e308, 1.7e308, 0.5e308]
    got = spectra.weyl_bound(s1, torch.tensor(lams, dtype=torch.float64)).tolist()
    exact = [float((Fraction(s1) + Fraction(lam)) / (Fraction(lam) - Fraction(s1))) for lam in lams[:2]]
    assert got[:2] == pytest.approx(exact, rel=RTOL)
    assert got[2] == float("inf")  # λ ≤ σ_1: no bound
    tiny = 5e-320  # subnormal
    est = float(spectra.supplement_estimate(tiny, tiny / 4, 3 * tiny))
    assert est == pytest.approx(
        float((Fraction(tiny) + 3 * Fraction(tiny)) / (3 * Fraction(tiny) - Fraction(tiny) / 4)), rel=1e-3
    )


def test_shift_refuses_a_lambda_that_is_not_one_finite_number() -> None:
    A = _matrix(6)
    for lam in (float("nan"), float("inf"), [1.0, 2.0], "ten"):
        with pytest.raises(InputError):
            spectra.shift(A, lam)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="float64's range"):
        spectra.shift(np.full((2, 2), 1e308), 1.7e308)
    with pytest.raises(InputError, match="λ must be"):
        spectra.shifted_condition_number(A, "ten")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="λ must be real"):
        spectra.shifted_condition_number(A, torch.tensor([1 + 1j]))


def test_arrays_users_pass_are_read_or_refused_in_one_error() -> None:
    A = _matrix(7)
    flipped = A[::-1]  # negative strides
    assert float(spectra.condition_number(flipped)) == pytest.approx(np.linalg.cond(A), rel=RTOL)
    ints = np.arange(12).reshape(3, 4) ** 2
    ref = np.linalg.cond(ints.astype(float))
    assert float(spectra.condition_number(ints, method="svd")) == pytest.approx(ref, rel=RTOL)
    assert float(spectra.condition_number([[2, 0], [0, 1]])) == 2.0
    for bad in (np.array([["a", "b"], ["c", "d"]]), [[1.0, 2.0], [3.0]], np.array([[None, 1.0]])):
        with pytest.raises(InputError, match="matrix of numbers"):
            spectra.condition_number(bad)  # type: ignore[arg-type]


def test_a_batch_of_no_matrices_gives_empty_results() -> None:
    empty = torch.zeros(0, 3, 4)
    assert tuple(spectra.shifted_condition_number(empty, [1.0, 2.0]).shape) == (0, 2)
    assert tuple(spectra.shifted_condition_number(empty, 1.0).shape) == (0,)
    assert tuple(spectra.condition_number(empty).shape) == (0,)
    assert tuple(spectra.singular_values(empty).shape) == (0, 3)


def test_attention_entropy_refuses_what_is_not_a_probability_or_a_window() -> None:
    with pytest.raises(InputError, match="negative"):
        spectra.attention_entropy(torch.tensor([[-0.5, 1.5], [0.5, 0.5]]))
    P = torch.softmax(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)), -1)
    with pytest.raises(InputError, match="window"):
        spectra.attention_entropy(P, window=0)


def test_identity_k_refuses_a_shape_with_no_tokens() -> None:
    for N, d in ((0, 3), (-1, 3), (3, -2)):
        with pytest.raises(InputError, match="I_k needs"):
            spectra.identity_k(N, d)


def test_an_integer_matrix_is_summarized_as_exact() -> None:
    ints = torch.tensor([[4, 0, 0], [0, 2, 0]])  # stored exactly: judged at float64
    summary = spectra.summarize(ints)
    assert float(summary.kappa) == float(np.linalg.cond(ints.numpy().astype(float)))
    assert int(summary.numerical_rank) == 2 and not bool(summary.below_precision)
    assert int(spectra.numerical_rank(torch.eye(3, dtype=torch.int32))) == 3


def test_a_normal_matrix_beside_a_huge_one_gets_its_own_answer_bitwise() -> None:
    A, B = _matrix(8), _matrix(9)
    batch = np.stack([A, np.ldexp(B, 1000)])
    for fn in (spectra.condition_number, spectra.singular_values, spectra.stable_rank):
        assert fn(batch)[0].tolist() == fn(A).tolist()
    summary = spectra.summarize(batch)
    assert summary.sigma[0].tolist() == spectra.summarize(A).sigma.tolist()
    assert float(summary.kappa[1]) == pytest.approx(float(np.linalg.cond(B)), rel=RTOL)
