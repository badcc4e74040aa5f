"""The digits a capture supports (docs/math.md#digits-a-capture-supports): relative uncertainties, their
statistics, and the printing.

The statistics are checked by brute force: every choice of per-sample values inside their intervals (the
corners, and random points) gives a statistic inside the interval the reported uncertainty claims, and the
claim is tight (some corner reaches its end)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from condcli.numbers import measured, supported_digits
from condcli.spectra import ScalarStream, aggregate
from condcli.spectra.uncertainty import STATISTICS, max_rel, power_rel, product_rel, rel_of

F32 = float(np.finfo(np.float32).eps)


def test_rel_of_is_tol_over_sigma_k_and_inf_for_a_floor() -> None:
    x = torch.randn(3, 20, 8, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    x[2, :, -1] = x[2, :, 0]  # singular: a floor
    ref = x.double().numpy()
    s = np.linalg.svd(ref, compute_uv=False)
    tol = F32 / 2 * np.linalg.norm(ref, axis=(1, 2))
    below = torch.tensor(s[:, -1] <= tol)
    got = rel_of(torch.tensor(s[:, -1]), torch.tensor(tol), below)
    np.testing.assert_allclose(got[:2].numpy(), tol[:2] / s[:2, -1], rtol=1e-12)
    assert math.isinf(float(got[2]))


def test_products_and_maxima() -> None:
    r = torch.tensor([0.1, 0.0, math.inf], dtype=torch.float64)
    np.testing.assert_allclose(power_rel(r, 3)[:2].numpy(), [1.1**3 - 1, 0.0])
    np.testing.assert_allclose(product_rel(r, torch.full_like(r, 0.5))[:2].numpy(), [1.1 * 1.5 - 1, 0.5])
    assert math.isinf(float(product_rel(r, r)[2]))
    values = torch.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 7.0]], dtype=torch.float64)
    rel = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], dtype=torch.float64)
    best, at = max_rel(values, rel, -1)
    assert best.tolist() == [5.0, 7.0] and at.tolist() == [0.2, 0.4]  # a tie: the first that attains it


def _intervals(v: np.ndarray, r: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo = np.where(f, v, v / (1 + r))
    hi = np.where(f | (r >= 1), np.inf, v / (1 - np.where(r < 1, r, 0)))
    return lo, hi


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(1.0, 1e8),
            st.floats(0.0, 0.9),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_a_statistics_interval_holds_every_choice_within_the_samples_and_is_tight(
    samples: list[tuple[float, float, bool]],
) -> None:
    v = np.array([s[0] for s in samples])
    f = np.array([s[2] for s in samples])
    r = np.where(f, np.inf, np.array([s[1] for s in samples]))
    agg = aggregate(v, f, r)
    lo, hi = _intervals(v, r, f)
    top = 1e3 * float(np.max(np.where(np.isinf(hi), v, hi)))
    finite_hi = np.where(np.isinf(hi), top, hi)  # a floor's "no upper end", as a stand-in above the rest
    for statistic, of in STATISTICS.items():
        s = of(v)
        rel = agg.uncertainty(statistic)
        assert rel is not None
        low = s / (1 + rel)
        high = math.inf if rel >= 1 else s / (1 - rel)
        corners = [of(np.where(np.array(c), lo, finite_hi)) for c in itertools.product([0, 1], repeat=v.size)]
        slack = 1e-9 + (1e-15 / (1 - rel) if rel < 1 else 0)  # 1 − s/high cancels near the floor
        assert all(low * (1 - 1e-9) <= c <= high * (1 + slack) for c in corners), statistic
        if not f.any():  # tight: a corner reaches an end of the claimed interval
            assert min(corners) <= low * (1 + 1e-9) or max(corners) >= high * (1 - 1e-9), (statistic, rel)


def test_stream_keeps_uncertainty_while_every_batch_gives_it() -> None:
    s = ScalarStream(floors=True)
    s.extend([1.0, 2.0], [False, False], [0.1, 0.2])
    s.extend([3.0], [True], [math.inf])
    got = s.result()
    assert got.per_sample_uncertainty == (0.1, 0.2, math.inf)
    rel = got.to_json()["rel_uncertainty"]
    assert rel["per_sample"] == [0.1, 0.2, "inf"] and set(rel) == {
        "median",
        "mean",
        "min",
        "max",
        "per_sample",
    }
    s.extend([4.0], [False])  # a batch without uncertainties: no claim rather than a wrong one
    assert s.result().per_sample_uncertainty is None and "rel_uncertainty" not in s.result().to_json()


@pytest.mark.parametrize(
    ("value", "rel", "shown"),
    [
        (151.234, 1e-5, "151"),
        (151.234, None, "151"),
        (8.81e9, 0.7, "≈9e+09"),  # the uncertainty's leading digit is in the first place
        (1.16e7, 0.1, "≈1.2e+07"),  # ±1.3e6: the second place is the last supported
        (1.15e7, 0.02, "1.15e+07"),  # ±2.3e5: the third
        (8.81e9, 1.0, "≥ 4.4e+09"),  # no upper end: the lower end it proves
        (math.inf, 0.5, "inf"),
    ],
)
def test_measured_prints_only_the_supported_digits(value: float, rel: float | None, shown: str) -> None:
    assert measured(value, rel) == shown


def test_supported_digits_follow_the_uncertainty() -> None:
    assert [supported_digits(100.0, r) for r in (1e-4, 1e-3, 1e-2, 0.2, 0.99)] == [3, 3, 3, 2, 1]
    assert supported_digits(100.0, 1.0) == 0
