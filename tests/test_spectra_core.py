"""Singular values, κ, numerical rank and the below-precision flag against NumPy float64 SVD
(docs/math.md#spectra)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from condcli import spectra
from tests.helpers import DTYPE_EPS, EPS, geometric_sigma, np_kappa, np_sigma, np_tol, prescribed

SHAPES = [(5, 9), (9, 5), (7, 7), (1, 6), (6, 1), (1, 1), (197, 64)]
METHODS = ["auto", "svd"]


@pytest.mark.parametrize("shape", SHAPES)
def test_singular_values_match_numpy(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 3, *shape))
    got = spectra.singular_values(X)
    assert got.dtype == torch.float64
    assert got.shape == (2, 3, min(shape))
    np.testing.assert_allclose(got.numpy(), np_sigma(X), rtol=1e-12, atol=1e-13)
    assert bool((got[..., :-1] >= got[..., 1:]).all()), "descending"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", ["auto", "svd"])
def test_condition_number_matches_numpy(shape: tuple[int, int], method: str) -> None:
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4, *shape))
    got = spectra.condition_number(X, method=method)  # type: ignore[arg-type]
    np.testing.assert_allclose(got.numpy(), np_kappa(X), rtol=1e-10)


@pytest.mark.parametrize("shape", [(40, 90), (90, 40), (60, 60)])
@pytest.mark.parametrize("kappa", [1.0, 1e3, 1e6, 1e9])
def test_prescribed_kappa(shape: tuple[int, int], kappa: float) -> None:
    N, d = shape
    rng = np.random.default_rng(3)
    X = prescribed(rng, N, d, geometric_sigma(min(N, d), kappa), batch=(3,))
    got = spectra.condition_number(X).numpy()  # auto: Gram where accurate, SVD above
    # Against the prescribed value: the matrix itself carries rounding of size ~eps·σ_1.
    np.testing.assert_allclose(got, kappa, rtol=max(N, d) * EPS * kappa + 1e-12)
    # Against an independent LAPACK SVD of the same matrix.
    np.testing.assert_allclose(got, np_kappa(X), rtol=1e-10 + 10 * EPS * kappa)


def test_single_matrix_gives_scalar_and_float32_input_is_upcast_exactly() -> None:
    rng = np.random.default_rng(4)
    X32 = torch.from_numpy(rng.standard_normal((8, 12)).astype(np.float32))
    got = spectra.condition_number(X32)
    assert got.shape == () and got.dtype == torch.float64
    np.testing.assert_allclose(float(got), np_kappa(X32.numpy().astype(np.float64)), rtol=1e-12)


def _rank_deficient_cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    dup = rng.standard_normal((6, 10))
    dup[3] = dup[1]  # N < d, two equal tokens
    tall = rng.standard_normal((10, 6))
    tall[:, 2] = 2.0 * tall[:, 4]  # N > d, dependent columns
    zero_row = rng.standard_normal((7, 7))
    zero_row[-1] = 0.0
    low = rng.standard_normal((12, 3)) @ rng.standard_normal((3, 20))  # rank 3 of 12
    return [
        ("dup", dup),
        ("tall", tall),
        ("zero_row", zero_row),
        ("low_rank", low),
        ("zero", np.zeros((4, 9))),
    ]


@pytest.mark.parametrize(("name", "X"), _rank_deficient_cases())
@pytest.mark.parametrize("method", METHODS)
def test_rank_deficient_is_inf_never_a_large_finite_number(name: str, X: np.ndarray, method: str) -> None:
    assert np.linalg.matrix_rank(X) < min(X.shape)
    kappa = float(spectra.condition_number(X, method=method))  # type: ignore[arg-type]
    assert kappa == np.inf, f"{name}: {kappa}"
    s = spectra.summarize(X)  # a float64 capture: tol is float64's own threshold (above u·‖X‖_F)
    assert float(s.kappa) == np.inf
    assert bool(s.below_precision)
    assert int(s.numerical_rank) == np.linalg.matrix_rank(X, tol=float(np_tol(X, EPS)))


def test_numerical_rank_and_flag_follow_capture_dtype() -> None:
    rng = np.random.default_rng(6)
    N, d = 30, 50
    sigma = np.r_[np.ones(25), np.full(5, 1e-7)]  # κ = 1e7: real in float64, noise in float32/bf16
    X = prescribed(rng, N, d, sigma, batch=(2,))
    for dtype in (torch.float64, torch.float32, "bfloat16"):
        s = spectra.summarize(X, capture_dtype=dtype)
        tol = np_tol(X, DTYPE_EPS[str(dtype).removeprefix("torch.")])  # 0.5·eps·‖X‖_F
        ref_rank = [np.linalg.matrix_rank(x, tol=t) for x, t in zip(X, tol, strict=True)]
        assert s.numerical_rank.tolist() == ref_rank
        np.testing.assert_allclose(s.tolerance.numpy(), tol, rtol=1e-12)
        assert s.below_precision.tolist() == [r < min(N, d) for r in ref_rank]
        np.testing.assert_allclose(s.kappa.numpy(), 1e7, rtol=1e-7)  # κ itself is the float64 value
    assert spectra.summarize(X, torch.float64).below_precision.tolist() == [False, False]
    assert spectra.summarize(X, torch.float32).below_precision.tolist() == [True, True]
    assert spectra.numerical_rank(X, "float32").tolist() == [25, 25]
    assert spectra.below_precision(X, torch.float32).tolist() == [True, True]


def test_capture_dtype_defaults_to_the_tensor_dtype() -> None:
    rng = np.random.default_rng(7)
    X = torch.from_numpy(prescribed(rng, 10, 20, np.r_[np.ones(9), 1e-5])).to(torch.float32)
    s = spectra.summarize(X)
    assert s.capture_dtype == "float32"
    x64 = X.double().numpy()
    tol = float(np_tol(x64, DTYPE_EPS["float32"]))
    np.testing.assert_allclose(float(s.tolerance), tol, rtol=1e-12)
    assert bool(s.below_precision) == (float(np_sigma(x64)[-1]) <= tol)


def test_unknown_method_and_dtype_are_clear_errors() -> None:
    from condcli.errors import InputError, UsageError

    with pytest.raises(UsageError, match="unknown method"):
        spectra.condition_number(np.eye(3), method="gram")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown floating dtype"):
        spectra.summarize(np.eye(3), capture_dtype="float33")


@pytest.mark.parametrize("bad", [np.zeros(5), np.zeros((0, 4)), np.zeros((3, 0)), np.ones((2, 2)) * 1j])
def test_bad_shapes_are_input_errors(bad: np.ndarray) -> None:
    from condcli.errors import InputError

    with pytest.raises(InputError):
        spectra.condition_number(bad)


def test_empty_batch_gives_empty_result() -> None:
    assert spectra.condition_number(np.zeros((0, 4, 5))).shape == (0,)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_results_stay_on_the_input_device_and_match_numpy(device: str) -> None:
    rng = np.random.default_rng(8)
    X_np = rng.standard_normal((3, 9, 14))
    X_np[1] = prescribed(rng, 9, 14, geometric_sigma(9, 1e5))  # forces the SVD fallback for one sample
    X = torch.from_numpy(X_np).to(device=device, dtype=torch.float32)
    ref64 = X.double().cpu().numpy()
    outs = {
        "sigma": spectra.singular_values(X),
        "kappa": spectra.condition_number(X),
        "shifted": spectra.shifted_condition_number(X, [0.0, 1.0, 10.0]),
        "corrected": spectra.corrected_condition_number(X),
    }
    for name, out in outs.items():
        assert out.device.type == device and out.dtype == torch.float64, name
    np.testing.assert_allclose(outs["sigma"].cpu().numpy(), np_sigma(ref64), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(outs["kappa"].cpu().numpy(), np_kappa(ref64), rtol=1e-10)
    s = spectra.summarize(X)
    assert s.kappa.device.type == device and s.capture_dtype == "float32"


@pytest.mark.parametrize("kappa", [1.0, 20.0, 250.0, 1e3, 1e6, 1e12])
def test_summarize_auto_agrees_with_svd(kappa: float) -> None:
    """The Gram fast path keeps only answers that agree with SVD; everything else is SVD itself."""
    rng = np.random.default_rng(int(np.log10(kappa)))
    for N, d in ((12, 30), (30, 12)):
        X = prescribed(rng, N, d, geometric_sigma(min(N, d), kappa), batch=(3,))
        fast = spectra.summarize(X, "float32", method="auto")
        ref = np_sigma(X)
        np.testing.assert_allclose(fast.sigma.numpy(), ref, rtol=1e-10, atol=100 * EPS)  # σ_1 = 1
        # two LAPACKs agree on σ_k only to ≈ eps·σ_1, i.e. on κ to ≈ eps·κ relative
        np.testing.assert_allclose(fast.kappa.numpy(), np_kappa(X), rtol=max(1e-10, 100 * EPS * kappa))
        slow = spectra.summarize(X, "float32", method="svd")
        assert fast.numerical_rank.tolist() == slow.numerical_rank.tolist()
        assert fast.below_precision.tolist() == slow.below_precision.tolist()
        flagged = np_sigma(X)[:, -1] <= np_tol(X, DTYPE_EPS["float32"])
        assert fast.below_precision.tolist() == flagged.tolist() == [kappa >= 1e12] * 3


def test_summarize_auto_on_a_singular_matrix_is_inf_not_a_gram_floor() -> None:
    X = np.zeros((4, 6))
    X[:3, :3] = np.eye(3)
    s = spectra.summarize(X, method="auto")
    assert s.kappa.item() == np.inf and s.numerical_rank.item() == 3 and bool(s.below_precision)


def test_threaded_linear_algebra_is_bitwise_the_sequential_loop() -> None:
    """Matrices are spread over torch's threads on CPU; each is still its own call
    (docs/math.md#aggregation)."""
    X = torch.from_numpy(np.random.default_rng(7).standard_normal((9, 40, 30)))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = spectra.summarize(X, method="auto").sigma
        torch.set_num_threads(max(2, threads))
        many = spectra.summarize(X, method="auto").sigma
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many)
    assert torch.equal(many[3], spectra.summarize(X[3], method="auto").sigma)  # alone, as in a batch
