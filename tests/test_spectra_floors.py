"""The precision budget and honest floors (docs/math.md#spectra, issue 18 item 1), against float64 NumPy SVD.

Every κ reported as a measurement agrees with SVD to ≤ 1e-6 relative; every floor is true (σ_k ≤ tol) and
equals σ_1/tol; the Gram path settles what it can (its switch is tested at the derived boundary) and spends
no SVD on a floor it certifies.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.spectra import core
from condcli.spectra.core import GRAM_ERROR, MEASURE_RTOL, gram_decides_floors
from tests.helpers import DTYPE_EPS, EPS, geometric_sigma, np_kappa, np_sigma, orthonormal, prescribed

N, D = 40, 120  # k = 40


def _with_sigma(rng: np.random.Generator, sigma: np.ndarray) -> np.ndarray:
    U, V = orthonormal(rng, N, len(sigma)), orthonormal(rng, D, len(sigma))
    return (U * sigma) @ V.T


def _spectrum_with_last(last: float) -> np.ndarray:
    """σ from 1 down to 1e-2 (k − 1 values), then σ_k = ``last``."""
    return np.r_[np.logspace(0, -2, N - 1), last]


@pytest.fixture
def svd_count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many matrices the summaries sent to SVD."""
    seen: list[int] = []
    real = core.svdvals

    def counted(x: torch.Tensor, *groups: list[slice] | None) -> torch.Tensor:
        seen.append(int(np.prod(x.shape[:-2])))
        return real(x, *groups)

    monkeypatch.setattr(core, "svdvals", counted)
    return seen


def _np_floor(X: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(below, floor value σ_1/tol) from NumPy: tol = eps/2·‖X‖_F (docs/math.md#spectra; these X are far from
    singular in float64, so float64's own threshold does not enter)."""
    s = np_sigma(X)
    tol = 0.5 * DTYPE_EPS[dtype] * np.linalg.norm(X, "fro", axis=(-2, -1))
    return s[..., -1] <= tol, s[..., 0] / tol


@pytest.mark.parametrize("factor", [0.5, 0.9, 1.1, 2.0])
def test_gram_switch_at_the_derived_boundary(factor: float, svd_count: list[int]) -> None:
    """Measured by Gram iff σ_k² − δ ≥ 2δ/MEASURE_RTOL (δ = GRAM_ERROR·sqrt(max(N, d))·eps64·‖X‖_F²); either
    side agrees with SVD to ≤ 1e-6."""
    rng = np.random.default_rng(int(factor * 10))
    sigma = _spectrum_with_last(1.0)
    fro2 = float((sigma[:-1] ** 2).sum())
    delta = GRAM_ERROR * np.sqrt(D) * EPS * fro2  # σ_k is tiny next to ‖X‖_F: fro2 ≈ without it
    boundary = np.sqrt(delta + 2 * delta / MEASURE_RTOL)
    X = _with_sigma(rng, _spectrum_with_last(factor * boundary))
    s = spectra.summarize(X, "float32", method="auto", floors=True)
    ref = np_kappa(X)
    assert abs(float(s.reported) / ref - 1) <= MEASURE_RTOL
    assert not bool(s.below_precision)
    assert (sum(svd_count) == 0) == (factor > 1), (factor, svd_count)  # ≈ κ 3e3 here
    if factor > 1:  # the Gram answer kept: its error is far inside the budget
        assert abs(float(s.kappa) / ref - 1) <= MEASURE_RTOL / 10


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_floors_straddling_tol_are_true_and_equal_sigma1_over_tol(dtype: str, svd_count: list[int]) -> None:
    rng = np.random.default_rng(3)
    fro = np.linalg.norm(_spectrum_with_last(0.0))
    tol = 0.5 * DTYPE_EPS[dtype] * fro
    factors = [1e-6, 0.1, 0.5, 0.99, 1.01, 2.0, 50.0]
    X = np.stack([_with_sigma(rng, _spectrum_with_last(f * tol)) for f in factors])
    s = spectra.summarize(X, dtype, method="auto", floors=True, exact_spectrum=False)
    below, floor = _np_floor(X, dtype)
    assert s.below_precision.tolist() == below.tolist() == [f <= 1 for f in factors]
    got = s.reported.numpy()
    np.testing.assert_allclose(got[below], floor[below], rtol=1e-12)  # the floor σ_1/tol, not noise
    np.testing.assert_allclose(got[~below], np_kappa(X)[~below], rtol=MEASURE_RTOL)
    if gram_decides_floors(dtype, (N, D)):  # bf16, fp16: floors certified with no SVD at all
        assert sum(svd_count) <= int((~below).sum())
    else:  # float32: tol² is below the Gram error, every matrix near or under tol goes to SVD
        assert sum(svd_count) >= int(below.sum())
    exact = spectra.summarize(X, dtype, method="auto", floors=True)  # the whole spectrum reported: SVD's
    np.testing.assert_allclose(exact.sigma.numpy(), np_sigma(X), rtol=1e-10, atol=100 * EPS)
    tols = 0.5 * DTYPE_EPS[dtype] * np.linalg.norm(X, "fro", axis=(-2, -1))
    assert exact.numerical_rank.tolist() == (np_sigma(X) > tols[:, None]).sum(-1).tolist()


def test_gram_decides_floors_only_where_tol_exceeds_its_error() -> None:
    shape = (197, 197)
    assert [gram_decides_floors(t, shape) for t in ("bfloat16", "float16", "float32", "float64")] == [
        True,
        True,
        False,
        False,
    ]


def test_a_zero_matrix_stays_inf() -> None:
    s = spectra.summarize(np.zeros((3, 5)), "float32", method="auto", floors=True)
    assert float(s.reported) == np.inf and bool(s.below_precision)


def _np_stat(v: np.ndarray, statistic: str) -> float:
    return float({"median": np.median, "mean": np.mean, "min": np.min, "max": np.max}[statistic](v))


@pytest.mark.parametrize("statistic", ["median", "mean", "min", "max"])
def test_a_statistic_that_raising_a_floor_can_move_is_marked_a_floor(statistic: str) -> None:
    """Soundness against brute force: where raising the floor samples (each true value ≥ its floor) changes
    the statistic, the aggregate marks it a floor."""
    rng = np.random.default_rng(5)
    unmarked_with_floors = 0
    for _ in range(300):
        n = int(rng.integers(1, 8))
        v = rng.integers(1, 6, n).astype(float)
        f = rng.random(n) < 0.4
        agg = spectra.aggregate(v, f)
        base = _np_stat(v, statistic)
        moved = any(
            _np_stat(np.where(f, v * scale, v), statistic) != base for scale in (1.0001, 1.5, 10.0, 1e6)
        )
        if moved:
            assert agg.is_floor(statistic), (v, f)
        if f.any() and not agg.is_floor(statistic):
            unmarked_with_floors += 1
    if statistic in ("median", "min"):  # floors far above these leave them measured
        assert unmarked_with_floors > 0


def test_json_marks_floors_per_sample_and_per_statistic() -> None:
    agg = spectra.aggregate([3.0, 1.0, 5e4], [False, False, True])
    js = agg.to_json()
    assert js["floor_count"] == 1 and js["per_sample_floor"] == [False, False, True]
    assert js["floor"] == {"median": False, "mean": True, "min": False, "max": True}
    assert "floor" not in spectra.aggregate([1.0, 2.0]).to_json()  # quantities that are never floors


def test_tables_show_a_floor_as_at_least() -> None:
    from condcli.cli.tables import median, stat

    agg = spectra.aggregate([3.1e4, 3.2e4, 10.0], [True, True, False])
    assert median(agg) == "≥ 3.1e+04 ⚠"
    assert stat(agg, "min") == "10"
    assert median(spectra.aggregate([1.0, 2.0, 9.0], [False, False, True])) == "2 ⚠"


def _gate_report(per_sample: list[float], floors: list[bool]) -> dict[str, object]:
    agg = spectra.aggregate(per_sample, floors).to_json()
    return {
        "inputs": {"count": len(per_sample)},
        "settings": {"lambda": 10.0},
        "embedding": {"kappa": agg, "below_precision": sum(floors), "capture_dtype": "float32"},
    }


def test_gate_a_floor_above_the_limit_fails_as_at_least_and_below_it_cannot_pass() -> None:
    from condcli.gate.rules import kappa_rule

    over = kappa_rule(_gate_report([4e4, 5e4, 6e4], [True, True, True]), 1e3, "median", "kappa", "test")
    assert not over.passed and "≥ " in (over.reason or "") and "floor" in (over.reason or "")
    under = kappa_rule(_gate_report([40.0, 50.0, 60.0], [True, False, False]), 1e3, "median", "kappa", "t")
    assert not under.passed and "below float32 resolution" in (under.reason or "")
    clean = kappa_rule(_gate_report([40.0, 50.0, 60.0], [False, False, False]), 1e3, "median", "kappa", "t")
    assert clean.passed
    # the value a rule reports is marked a floor where the statistic is one (docs/math.md#spectra: where
    # raising a floor sample could move it), in the JSON and as "≥ x ⚠" in the tables
    assert over.floor and over.to_json()["floor"] is True and over.shown() == ("≥ 5e+04 ⚠", "1000")
    assert under.floor and under.shown()[0] == "≥ 50 ⚠"  # raising the floor 40 can move the median
    top = kappa_rule(_gate_report([40.0, 50.0, 60.0], [False, False, True]), 1e3, "median", "kappa", "t")
    assert not top.floor and top.to_json()["floor"] is False and top.shown()[0] == "50"  # it cannot here
    assert not clean.floor


def test_the_check_page_shows_a_floored_rule_value_as_at_least() -> None:
    from condcli.gate.rules import kappa_rule
    from condcli.html.sections_check import rules_html

    rule = kappa_rule(_gate_report([4e4, 5e4, 6e4], [True, True, True]), 1e3, "median", "kappa", "test")
    page = rules_html({"checks": [rule.to_json()]})
    assert "≥ 5e+04 ⚠" in page
    plain = kappa_rule(_gate_report([40.0, 50.0, 60.0], [False] * 3), 1e3, "median", "kappa", "t")
    assert "≥" not in rules_html({"checks": [plain.to_json()]})


@pytest.mark.parametrize("model", ["vit-plain", "bert-docstrings"])
def test_reports_are_bytewise_identical_whatever_the_batch_size(cli, model: str) -> None:  # type: ignore[no-untyped-def]
    outs = []
    for batch in ("1", "3", "8"):
        result = cli("spectrum", model, "--max-samples", "8", "--batch-size", batch, "--json")
        assert result.exit_code == 0, result.output
        outs.append(result.stdout)
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("shape", [(197, 197), (197, 768), (768, 197), (40, 40), (3, 50)])
def test_the_gram_error_bound_holds(shape: tuple[int, int]) -> None:
    """|λ̂_i − σ_i²| ≤ δ = GRAM_ERROR·sqrt(max(N, d))·eps64·‖X‖_F² for the Gram path's eigenvalues, on
    prescribed spectra (κ 1 … 1e8) and on softmax rows (attention-like P), against NumPy's SVD."""
    rng = np.random.default_rng(sum(shape))
    n, d = shape
    k = min(n, d)
    mats = [prescribed(rng, n, d, geometric_sigma(k, kappa)) for kappa in (1.0, 1e3, 1e8)]
    logits = rng.standard_normal((n, d)) * 3
    mats.append(np.exp(logits) / np.exp(logits).sum(-1, keepdims=True))
    X = np.stack(mats)
    got = core.gram_eigen_spectrum(torch.from_numpy(X)).numpy() ** 2
    ref = np_sigma(X) ** 2
    delta = GRAM_ERROR * np.sqrt(max(shape)) * EPS * (X**2).sum((-2, -1))
    assert (np.abs(got - ref).max(-1) <= delta).all(), np.abs(got - ref).max(-1) / delta
