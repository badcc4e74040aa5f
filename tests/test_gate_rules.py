"""The CI gate's rules on hand-made report dicts: a limit exactly met, the statistic, below-precision and
singular X, the worst layer named, and compare's ratios and fmt_pair. No model runs here (see
test_cli_check.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from condcli.conditioning import Conditioning
from condcli.errors import CondcliError, InputError, UsageError
from condcli.gate import config as gc
from condcli.gate.matching import compare_reports
from condcli.gate.report import CompareRow, fmt_pair
from condcli.gate.rules import evaluate, kappa_rule, layer_rule, seen_key
from tests.gate_reports import layer, report


def cfg(**limits: float) -> gc.CheckConfig:
    return gc.CheckConfig(limits=limits, sources=dict.fromkeys(limits, "command line"))


# --- rules -------------------------------------------------------------------------------------------


def test_a_rule_exactly_at_its_limit_passes_and_just_above_fails() -> None:
    r = report([100.0, 150.0, 200.0])  # median 150
    at = kappa_rule(r, 150.0, "median", "kappa", "command line")
    assert at.passed and at.value == 150.0 and at.reason is None
    above = kappa_rule(r, np.nextafter(150.0, 0), "median", "kappa", "command line")
    assert not above.passed
    value, limit = fmt_pair(above.value, above.limit)
    assert value != limit and float(value) > float(limit)  # printed so that the failure is visible
    assert f"{value} > {limit}" in (above.reason or "")


def test_statistic_chooses_median_mean_or_worst_sample() -> None:
    r = report([100.0, 150.0, 500.0])
    assert kappa_rule(r, 200, "median", "kappa", "").passed
    assert not kappa_rule(r, 200, "mean", "kappa", "").passed  # mean 250
    worst = kappa_rule(r, 200, "max", "kappa", "")
    assert not worst.passed and worst.value == 500.0 and worst.statistic == "max"


def test_below_precision_x_fails_even_under_the_limit_with_that_reason() -> None:
    r = report([1.0e7, 50.0, 60.0], below=1)  # median 60 ≪ limit, but one κ is only a floor
    result = kappa_rule(r, 1e9, "median", "kappa", "")
    assert not result.passed
    assert result.reason == (
        "X is below float32 resolution in 1 of 3 samples (its κ is a floor, not a measurement) "
        "— rerun with `dtype=float64`"
    )


def test_singular_x_fails_with_that_reason_and_no_dtype_hint_in_float64() -> None:
    r = report([math.inf, 50.0, 60.0], below=1, dtype="float64")
    result = kappa_rule(r, 1e9, "median", "kappa", "")
    assert not result.passed and result.value == 60.0
    assert result.reason == "X is numerically singular (κ = inf) in 1 of 3 samples"
    both = kappa_rule(report([math.inf, math.inf, 5e7], below=3), 10, "median", "kappa", "")
    assert both.reason is not None
    assert both.reason.startswith("κ(X) median inf > 10; X is numerically singular (κ = inf) in 2 of 3")
    assert "below float32 resolution in 1 of 3 samples" in both.reason


def test_layer_rules_take_the_worst_layer_and_name_it() -> None:
    layers = [layer(0, [10, 12], [1e5, 2e5]), layer(3, [40, 44], [9e8, 1e9]), layer(5, [30, 31], [5e6, 5e6])]
    r = report([10.0, 12.0], layers=layers)
    k = layer_rule(r, "max_kappa_layer", 42.0, "median", "")
    assert k.passed and k.value == 42.0 and (k.layer, k.layer_name) == (3, "blocks.3")
    assert k.metric == "layers[3].kappa"
    mu = layer_rule(r, "max_mu_la", 1e8, "median", "")
    assert not mu.passed and mu.value == 9.5e8
    assert mu.reason == "μ(LA) median 9.5e+08 > 1e+08 in 1 of 3 layers, worst layer 3 blocks.3"


def test_a_layer_below_precision_fails_naming_the_layer() -> None:
    layers = [layer(0, [10, 12], [1e5, 2e5]), layer(1, [40, 44], [9e5, 1e6], below_a=2)]
    r = report([10.0, 12.0], layers=layers)
    assert layer_rule(r, "max_kappa_layer", 100, "median", "").passed  # X_l is fine
    mu = layer_rule(r, "max_mu_la", 1e9, "median", "")
    assert not mu.passed
    assert mu.reason == (
        "A_l is below float32 resolution in layer 1 blocks.1 in 2 of 2 samples "
        "(its κ is a floor, not a measurement) — rerun with `dtype=float64`"
    )


def test_evaluate_orders_rules_and_needs_layers() -> None:
    r = report([10.0], layers=[layer(0, [5], [50])])
    out = evaluate(r, cfg(max_mu_la=100, max_kappa=20, max_kappa_layer=6), "kappa")
    assert [c.rule for c in out] == ["max_kappa", "max_kappa_layer", "max_mu_la"]  # the registry's order
    assert all(c.passed for c in out)
    with pytest.raises(UsageError, match="max_mu_la needs layers"):
        evaluate(report([10.0]), cfg(max_mu_la=100), "kappa")


def test_seen_key_is_what_the_blocks_compute_with() -> None:
    assert seen_key(None, 10) == "kappa"
    assert seen_key(Conditioning(10.0), 10.0) == "kappa_conditioned"
    assert seen_key(Conditioning(10.0), 5.0) is None  # another λ than the model's own: not measured
    assert seen_key(Conditioning(10.0, "correction"), 5.0) == "kappa_corrected"
    r = report([300.0, 310.0])
    own = kappa_rule(r, 3.0, "median", "kappa_conditioned", "")
    assert own.passed and own.value == 2.0 and own.label == "κ(X + 10·I_k), the model's own shift"


# --- compare -----------------------------------------------------------------------------------------


def test_compare_ratios_are_b_over_a_with_explicit_inf() -> None:
    a = report([100.0, 200.0], layers=[layer(0, [100, 200], [1e6, 1e6])])
    b = report([2.0, 4.0], layers=[layer(0, [2, 4], [math.inf, math.inf])])
    rows, warnings = compare_reports(a, b, "median", "kappa", "kappa")
    by = {r.key: r for r in rows}
    assert by["embedding.kappa"].ratio == pytest.approx(3.0 / 150.0)
    assert by["layers[0].mu_la"].ratio == math.inf
    assert by["layers[0].kappa_wq"].ratio == 1.0
    assert warnings == []
    assert CompareRow("k", "l", "l", None, None, None, math.inf, math.inf, False, False).ratio is None
    assert CompareRow("k", "l", "l", None, None, None, math.inf, 5.0, False, False).ratio == 0.0


def test_compare_says_what_the_blocks_see_and_what_differs() -> None:
    a = report([100.0, 200.0])
    b = report([300.0, 400.0], layers=[layer(0, [2, 4], [9, 9])])
    b["embedding"]["model_conditioning"] = "X + 10·I_k"
    b["inputs"].update(kind="text", description="docstrings")
    rows, warnings = compare_reports(a, b, "median", "kappa", "kappa_conditioned")
    seen = rows[0]
    assert seen.key == "embedding.seen" and (seen.a, seen.b) == (150.0, 2.0)
    assert seen.label == "κ of the tokens the blocks see (A: κ(X); B: κ(X + 10·I_k))"
    assert warnings[0] == (
        "A saw synthetic inputs (d) and B saw text inputs (docstrings): each model's numbers are about its "
        "own inputs"
    )
    assert any(w.startswith("B adds X + 10·I_k at X itself") for w in warnings)
    assert warnings[-1].startswith("6 metric(s) only B has, not compared: layers[0].kappa")
    _, warnings = compare_reports(a, b, "median", "kappa", None)
    assert "B adds its own X + λ·I_k with another λ than `lam`" in warnings[-2]


def test_fmt_pair_never_prints_a_failing_value_equal_to_its_limit() -> None:
    assert fmt_pair(100.0, 100.0) == ("100", "100")
    assert fmt_pair(138.60155, 138.60155) == ("138.602", "138.602")
    assert fmt_pair(100.00001, 100.0) == ("100.00001", "100")
    assert fmt_pair(139.2, 139.19) == ("139.2", "139.19")
    assert fmt_pair(141.3, 139.98765) == ("141", "139.988")
    assert fmt_pair(139.2, 1e12) == ("139", "1e+12")
    assert fmt_pair(math.inf, 10) == ("inf", "10")
    x = 138.60155345888873
    assert fmt_pair(x, float(np.nextafter(x, 0))) == ("138.60155345888873", "138.6015534588887")


def test_errors_are_condcli_errors_with_exit_2() -> None:
    assert issubclass(InputError, CondcliError) and InputError.exit_code == UsageError.exit_code == 2


def test_a_rule_states_the_uncertainty_of_the_value_it_judged() -> None:
    """A κ near its floor carries a large relative uncertainty (docs/math.md): the reason and the JSON say it,
    and a value measured to all its digits says nothing more."""
    r = report([1.2e7, 1.2e7])
    r["embedding"]["kappa"]["rel_uncertainty"] = {"median": 0.7, "mean": 0.7, "min": 0.7, "max": 0.7}
    near = kappa_rule(r, 1e6, "median", "kappa", "")
    assert near.reason == "κ(X) median 1.2e+07 ±70% > 1e+06"
    assert near.to_json()["rel_uncertainty"] == 0.7 and near.shown()[0] == "1.2e+07 ±70%"
    layers = [layer(0, [10, 12], [1e5, 2e5]), layer(3, [40, 44], [9e8, 1e9])]
    layers[1]["mu_la"]["rel_uncertainty"] = {"median": 0.25, "mean": 0.25, "min": 0.25, "max": 0.25}
    mu = layer_rule(report([10.0, 12.0], layers=layers), "max_mu_la", 1e8, "median", "")
    assert mu.reason == "μ(LA) median 9.5e+08 ±25% > 1e+08 in 1 of 2 layers, worst layer 3 blocks.3"
    far = kappa_rule(report([151.0, 151.0]), 100, "median", "kappa", "")
    assert far.reason == "κ(X) median 151 > 100" and "rel_uncertainty" not in far.to_json()
