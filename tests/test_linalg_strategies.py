"""The linear-algebra strategies (condcli.spectra.strategies) on CPU: each against float64 NumPy SVD, and each
bitwise invariant to how samples are batched (docs/math.md#spectra, #aggregation; issue 18 item 2)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.errors import UsageError
from condcli.spectra import strategies
from condcli.spectra._tensor import groups_where, svdvals
from condcli.spectra.core import MEASURE_RTOL
from tests.helpers import DTYPE_EPS, geometric_sigma, np_reported_kappa, np_sigma, prescribed

NAMES = sorted(strategies.STRATEGIES)


def _samples(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` samples of (2 groups, 3 heads) 24×40 matrices stored in float32: well conditioned ones (the
    Gram path measures them), κ ≈ 1e5 ones (beyond the Gram path: SVD) and κ ≈ 1e9 ones (below float32's
    resolution: floors)."""
    out = np.empty((count, 2, 3, 24, 40))
    for s in range(count):
        for g in range(2):
            out[s, g, 0] = prescribed(rng, 24, 40, geometric_sigma(24, 10.0 ** (1 + s % 3)))
            out[s, g, 1] = prescribed(rng, 24, 40, geometric_sigma(24, 1e5))
            out[s, g, 2] = prescribed(rng, 24, 40, geometric_sigma(24, 1e9))
    return out.astype(np.float32).astype(np.float64)  # exactly float32 values


@pytest.fixture(scope="module")
def stack() -> np.ndarray:
    return _samples(np.random.default_rng(18), 5)


@pytest.mark.parametrize("name", NAMES)
def test_svdvals_agree_with_numpy(name: str, stack: np.ndarray) -> None:
    with strategies.using(name):
        got = svdvals(torch.from_numpy(stack)).numpy()
    ref = np_sigma(stack)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-13 * ref.max()  # backward-stable SVD: absolute error ≈ eps·σ_1


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", ["auto", "svd"])
def test_reported_kappa_agrees_with_numpy(name: str, method: str, stack: np.ndarray) -> None:
    """Every κ reported as a measurement within 1e-6 of float64 SVD's, every floor σ_1/tol and true."""
    with strategies.using(name):
        s = spectra.summarize(torch.from_numpy(stack), "float32", method=method, floors=True)  # type: ignore[arg-type]
    ref = np_reported_kappa(stack, DTYPE_EPS["float32"])
    below = np_sigma(stack)[..., -1] <= 0.5 * DTYPE_EPS["float32"] * np.linalg.norm(stack, axis=(-2, -1))
    assert (s.below_precision.numpy() == below).all()
    assert below.any() and (~below).any()  # both kinds present
    assert np.abs(s.reported.numpy() / ref - 1).max() <= MEASURE_RTOL


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", ["auto", "svd"])
def test_results_do_not_depend_on_the_sample_batch(name: str, method: str, stack: np.ndarray) -> None:
    """Bitwise: all 5 samples at once = each alone = batches of 2, 2, 1 — σ, κ, floors and ranks."""
    x = torch.from_numpy(stack)

    def run(parts: list[slice]) -> list[torch.Tensor]:
        outs = [spectra.summarize(x[p], "float32", method=method, floors=True) for p in parts]  # type: ignore[arg-type]
        return [torch.cat([getattr(o, f) for o in outs]) for f in ("sigma", "kappa", "numerical_rank")] + [
            torch.cat([o.below_precision for o in outs])
        ]

    with strategies.using(name):
        whole = run([slice(0, 5)])
        alone = run([slice(i, i + 1) for i in range(5)])
        split = run([slice(0, 2), slice(2, 4), slice(4, 5)])
    for a, b, c in zip(whole, alone, split, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_groups_where_keeps_each_samples_selection_together() -> None:
    mask = torch.tensor([[True, False, True], [False, False, False], [False, True, True]])
    assert groups_where(mask) == [slice(0, 2), slice(2, 4)]
    assert groups_where(torch.tensor([True, False, True])) is None  # one matrix a sample: each alone


def test_batched_calls_never_mix_samples(monkeypatch: pytest.MonkeyPatch, stack: np.ndarray) -> None:
    """The batched strategy hands the op one sample's matrices at a time (5 samples × 6 matrices)."""
    seen: list[int] = []
    real = torch.linalg.svdvals

    def counted(m: torch.Tensor) -> torch.Tensor:
        seen.append(int(np.prod(m.shape[:-2])) if m.ndim > 2 else 1)
        out: torch.Tensor = real(m)
        return out

    monkeypatch.setattr(torch.linalg, "svdvals", counted)
    with strategies.using("batched"):
        svdvals(torch.from_numpy(stack))
    assert seen == [6] * 5


def test_defaults_and_choice() -> None:
    assert strategies.strategy_for(torch.device("cpu")).name == strategies.DEFAULTS["cpu"] == "threads"
    assert strategies.DEFAULTS["cuda"] in strategies.STRATEGIES
    assert strategies.strategy_for(torch.device("meta")).name == "loop"  # a kind without a default
    with strategies.using("batched"), strategies.using("loop"):
        assert strategies.strategy_for(torch.device("cpu")).name == "loop"  # innermost wins
    with pytest.raises(UsageError, match="unknown linear-algebra strategy 'fast'"):
        strategies.lookup("fast")


@pytest.fixture
def two_threads() -> Iterator[None]:
    """torch on 2 threads for the test, the suite's own count restored after."""
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _mkl_max_threads() -> int:
    """MKL's thread count as the calling thread sees it (MKL_Get_Max_Threads from torch's library)."""
    lib = ctypes.CDLL(str(strategies.TORCH_CPU_LIBRARY))
    return int(lib.MKL_Get_Max_Threads())


@pytest.mark.usefixtures("two_threads")
def test_decompositions_run_on_one_mkl_thread_and_the_caller_keeps_its_own() -> None:
    """A small decomposition loses to MKL's own threads (2.1 ms vs 3.3 ms for a 197×197 SVD here, and a pool
    of workers each starting MKL threads oversubscribes the cores): thread_map runs every call on one MKL
    thread, in the pool and on the sequential path alike, and leaves the caller's setting as it was."""
    assert torch.backends.mkl.is_available() and strategies._MKL_THREADS is not None  # x86 wheels link MKL
    before = _mkl_max_threads()
    assert before == 2
    seen: list[int] = []

    def op(m: torch.Tensor) -> torch.Tensor:
        seen.append(_mkl_max_threads())
        return torch.linalg.svdvals(m)

    mats = list(torch.randn(6, 20, 20, dtype=torch.float64).unbind(0))
    strategies.thread_map(op, mats)  # the pool
    strategies.thread_map(op, mats[:1])  # one matrix: the calling thread
    assert seen == [1] * 7
    assert _mkl_max_threads() == before


@pytest.mark.usefixtures("two_threads")
def test_pool_and_calling_thread_give_the_same_bits() -> None:
    """Gram eigenvalues of a 197×768 matrix (MKL's threaded matmul differs in the last digits): the same
    whether thread_map runs the matrix in a worker or on the caller's thread."""
    x = torch.randn(3, 197, 768, dtype=torch.float64, generator=torch.Generator().manual_seed(5))

    def op(m: torch.Tensor) -> torch.Tensor:
        return torch.linalg.eigvalsh(m @ m.mT)

    pooled = strategies.thread_map(op, list(x.unbind(0)))
    for m, got in zip(x.unbind(0), pooled, strict=True):
        assert torch.equal(strategies.thread_map(op, [m])[0], got)
