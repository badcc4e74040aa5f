"""The CI gate's pure parts on hand-made report dicts: rules, config precedence and validation, tolerance,
baseline loading and comparison, JUnit, compare ratios. No model runs here (see test_cli_check.py)."""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from condcli.conditioning import Conditioning
from condcli.errors import CondcliError, InputError, UsageError
from condcli.gate import config as gc
from condcli.gate.baseline import compare_baseline, compare_one, context_warnings, load_baseline
from condcli.gate.compare import compare_reports
from condcli.gate.junit import check_junit_path, junit_xml, write_junit
from condcli.gate.metrics import Metric, extract_metrics
from condcli.gate.report import CheckResult, CompareRow, fmt_pair
from condcli.gate.rules import evaluate, kappa_rule, layer_rule, seen_key


def agg(values: list[float]) -> dict[str, Any]:
    """An aggregate as the report writes it, with NumPy's statistics (SPEC §6: inf as "inf")."""
    v = np.asarray(values, dtype=np.float64)

    def j(x: float) -> float | str:
        return "inf" if math.isinf(x) else float(x)

    return {
        "median": j(float(np.median(v))),
        "mean": j(float(np.mean(v))),
        "min": j(float(v.min())),
        "max": j(float(v.max())),
        "per_sample": [j(x) for x in values],
        "inf_count": int(np.isinf(v).sum()),
    }


def layer(index: int, kappa: list[float], mu_la: list[float], below_x: int = 0, below_a: int = 0) -> dict:
    return {
        "index": index,
        "name": f"blocks.{index}",
        "kappa_wq": 10.0,
        "kappa_wk": 20.0,
        "kappa_wv": 30.0,
        "kappa": agg(kappa),
        "kappa_attn_input": agg(kappa),
        "mu_la": agg(mu_la),
        "mu_a": None,  # not observable for this family
        "kappa_probs": None,
        "below_precision": {"x": below_x, "attn_input": below_a, "probs": None},
        "conditioned": None,
    }


def report(
    kappa: list[float],
    below: int = 0,
    layers: list[dict] | None = None,
    dtype: str = "float32",
    **extra: Any,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "schema_version": 1,
        "tool": {"name": "condcli", "version": "0.1.0", "torch": "2.0"},
        "command": "spectrum",
        "model": {"spec": "m", "num_layers": 4},
        "inputs": {"kind": "synthetic", "count": len(kappa), "description": "d"},
        "settings": {"lambda": 10.0, "dtype": dtype, "device": "cpu", "seed": 0},
        "embedding": {
            "capture_dtype": dtype,
            "kappa": agg(kappa),
            "kappa_conditioned": agg([2.0] * len(kappa)),
            "kappa_corrected": agg([1.9] * len(kappa)),
            "below_precision": below,
        },
        "layers": layers or [],
    }
    r.update(extra)
    return r


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
        "— rerun with --dtype float64"
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
        "(its κ is a floor, not a measurement) — rerun with --dtype float64"
    )


def test_evaluate_orders_rules_and_needs_layers() -> None:
    r = report([10.0], layers=[layer(0, [5], [50])])
    out = evaluate(r, cfg(max_mu_la=100, max_kappa=20, max_kappa_layer=6), "kappa")
    assert [c.rule for c in out] == ["max_kappa", "max_mu_la", "max_kappa_layer"]
    assert all(c.passed for c in out)
    with pytest.raises(UsageError, match="--max-mu-la needs layers"):
        evaluate(report([10.0]), cfg(max_mu_la=100), "kappa")


def test_seen_key_is_what_the_blocks_compute_with() -> None:
    assert seen_key(None, 10) == "kappa"
    assert seen_key(Conditioning(10.0), 10.0) == "kappa_conditioned"
    assert seen_key(Conditioning(10.0), 5.0) is None  # another λ than the model's own: not measured
    assert seen_key(Conditioning(10.0, "correction"), 5.0) == "kappa_corrected"
    r = report([300.0, 310.0])
    own = kappa_rule(r, 3.0, "median", "kappa_conditioned", "")
    assert own.passed and own.value == 2.0 and own.label == "κ(X + 10·I_k), the model's own shift"


# --- config ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("10%", 0.1), ("2.5 %", 0.025), ("0.1", 0.1), (0.1, 0.1), ("0", 0.0), ("150%", 1.5), (0, 0.0)],
)
def test_tolerance_is_a_percentage_or_a_fraction(text: Any, value: float) -> None:
    assert gc.parse_tolerance(text, "--tolerance") == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-5%", "must be a finite number ≥ 0"),
        ("-0.1", "must be a finite number ≥ 0"),
        ("ten", "is not a number"),
        ("10", "is ambiguous"),
        ("inf%", "must be a finite number"),
        (True, "must be a percentage or a fraction"),
    ],
)
def test_bad_tolerance_is_a_usage_error(text: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        gc.parse_tolerance(text, "--tolerance")


@pytest.mark.parametrize("value", [0.5, 0, -3, math.inf, math.nan, "100", True])
def test_bad_limits_are_refused(value: Any) -> None:
    with pytest.raises(UsageError):
        gc.check_limit(value, "--max-kappa")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


NONE = dict.fromkeys(gc.KEYS)


def test_command_line_wins_over_the_file_key_by_key(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        '[tool.condcli.check]\nmax_kappa = 200\nmax_mu_la = 1e12\nstatistic = "max"\n'
        'baseline = "ci/base.json"\ntolerance = "5%"\n',
    )
    c = gc.resolve({**NONE, "max_kappa": 300.0, "tolerance": "0.2"}, None, tmp_path)
    assert c.limits == {"max_kappa": 300.0, "max_mu_la": 1e12}
    assert c.sources["max_kappa"] == "command line" and c.sources["max_mu_la"].endswith("pyproject.toml")
    assert c.statistic == "max" and c.tolerance == 0.2
    assert c.baseline == tmp_path / "ci" / "base.json"  # relative to the file's folder
    assert c.config_file == tmp_path / "pyproject.toml"


def test_config_flag_points_elsewhere_and_defaults_apply(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", "[tool.condcli.check]\nmax_kappa = 200\n")
    other = write(tmp_path / "ci.toml", "[tool.condcli.check]\nmax_kappa_layer = 500\n")
    c = gc.resolve(dict(NONE), other, tmp_path, explicit=True)
    assert c.limits == {"max_kappa_layer": 500.0} and c.statistic == "median" and c.tolerance == 0.1
    empty = gc.resolve(dict(NONE), None, tmp_path / "nowhere")  # no pyproject.toml at all
    assert empty.empty and empty.config_file is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[tool.condcli.check]\nmax_kapa = 3\n",
            r"unknown key 'max_kapa' — did you mean 'max_kappa'\? valid keys: max_kappa,",
        ),
        ("[tool.condcli.check]\nmax_kappa = '3'\n", "max_kappa in .* must be a number, got '3'"),
        ("[tool.condcli.check]\nmax_kappa = 0.5\n", "must be ≥ 1, got 0.5"),
        ("[tool.condcli.check]\nstatistic = 'p90'\n", "statistic in .* 'p90' is not known"),
        ("[tool.condcli.check]\ntolerance = -1\n", "must be a finite number ≥ 0"),
        ("[tool.condcli.check]\nbaseline = 3\n", "baseline in .* must be a file path"),
        ("[tool.condcli]\ncheck = 3\n", r"\[tool.condcli.check\] in .* is not a table"),
        ("[tool.condcli.check\n", "is not valid TOML"),
    ],
)
def test_malformed_config_is_one_usage_error(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "pyproject.toml", text)
    with pytest.raises(UsageError, match=message) as e:
        gc.resolve(dict(NONE), path, tmp_path, explicit=True)
    assert "\n" not in e.value.line()


def test_missing_or_unreadable_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        gc.resolve(dict(NONE), tmp_path / "nope.toml", tmp_path, explicit=True)
    with pytest.raises(UsageError, match="is not a file"):
        gc.resolve(dict(NONE), tmp_path, tmp_path, explicit=True)
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"x = '\xe9'\n")
    with pytest.raises(UsageError, match="is not UTF-8"):
        gc.resolve(dict(NONE), bad, tmp_path, explicit=True)


# --- baseline ----------------------------------------------------------------------------------------


def metric(key: str, value: float, layer: int | None = None, name: str | None = None) -> Metric:
    return Metric(key, key, value, layer, name, False)


@pytest.mark.parametrize(
    ("old", "new", "passed", "improved", "reason"),
    [
        (100.0, 110.0, True, False, None),  # exactly old·(1 + 10%): not a regression
        (100.0, 110.01, False, False, "regressed: 110 > baseline 100 + 10% (×1.1)"),
        (100.0, 50.0, True, True, "improved: 50 from baseline 100 (×0.5)"),
        (100.0, 95.0, True, False, None),  # better, but within the tolerance: nothing to say
        (100.0, math.inf, False, False, "now numerically singular (inf); baseline 100"),
        (math.inf, math.inf, True, False, "numerically singular (inf) in the baseline too"),
        (math.inf, 1e6, True, True, "improved: 1e+06 from baseline inf"),
    ],
)
def test_baseline_regressions_fail_and_improvements_do_not(
    old: float, new: float, passed: bool, improved: bool, reason: str | None
) -> None:
    result = compare_one(metric("embedding.kappa", old), metric("embedding.kappa", new), 0.1, "median", "b")
    assert (result.passed, result.improved, result.reason) == (passed, improved, reason)
    assert result.baseline == old and result.value == new


def test_layers_are_matched_by_index_and_name() -> None:
    old = {
        "embedding.kappa": metric("embedding.kappa", 10),
        "layers[0].kappa": metric("layers[0].kappa", 10, 0, "blocks.0"),
        "layers[1].kappa": metric("layers[1].kappa", 10, 1, "blocks.1"),
        "layers[2].kappa": metric("layers[2].kappa", 10, 2, "blocks.2"),
        "layers[0].mu_a": metric("layers[0].mu_a", 10, 0, "blocks.0"),
    }
    new = {
        "embedding.kappa": metric("embedding.kappa", 20),
        "embedding.kappa_corrected": metric("embedding.kappa_corrected", 2),
        "layers[0].kappa": metric("layers[0].kappa", 10, 0, "blocks.0"),
        "layers[1].kappa": metric("layers[1].kappa", 99, 1, "encoder.1"),  # another layer at index 1
        "layers[5].kappa": metric("layers[5].kappa", 10, 5, "blocks.5"),
    }
    results, warnings = compare_baseline(old, new, 0.1, "median", "b.json")
    assert [(r.metric, r.passed) for r in results] == [("embedding.kappa", False), ("layers[0].kappa", True)]
    assert warnings == [
        "layer 1 is 'blocks.1' in the baseline and 'encoder.1' now: not compared",
        "layer(s) 2 of the baseline were not analysed now: not compared (pass --layers to choose them)",
        "layer(s) 5 are not in the baseline: not compared",
        "1 baseline metric(s) not measured now: layers[0].mu_a",
        "1 metric(s) not in the baseline: embedding.kappa_corrected",
    ]


def test_context_differences_are_warnings() -> None:
    old = report([10.0, 11.0])
    new = report([10.0, 11.0, 12.0])
    new["settings"].update(device="cuda:0", seed=3)
    new["tool"]["torch"] = "2.9"
    new["model"]["spec"] = "other"
    new["inputs"]["description"] = "3 images"
    assert context_warnings(old, new) == [
        "the baseline's model differs: 'm' there, 'other' now",
        "the baseline's torch version differs: '2.0' there, '2.9' now",
        "the baseline's device differs: 'cpu' there, 'cuda:0' now",
        "the baseline's seed differs: 0 there, 3 now",
        "the baseline's number of samples differs: 2 there, 3 now",
    ]
    assert context_warnings(old, report([1.0, 2.0])) == []


def test_baseline_metrics_read_every_section() -> None:
    r = report([10.0, 30.0], layers=[layer(2, [5, 7], [50, 70])])
    r["layers"][0]["conditioned"] = {
        "kappa": agg([2, 3]),
        "kappa_attn_input": agg([2, 4]),
        "mu_la": agg([9, 9]),
        "mu_a": None,
        "kappa_probs": None,
        "below_precision": {"x": 0, "attn_input": 0, "probs": None},
    }
    m = extract_metrics(r, "max")
    assert list(m) == [
        "embedding.kappa",
        "embedding.kappa_conditioned",
        "embedding.kappa_corrected",
        "layers[2].kappa",
        "layers[2].kappa_attn_input",
        "layers[2].mu_la",
        "layers[2].kappa_wq",
        "layers[2].kappa_wk",
        "layers[2].kappa_wv",
        "layers[2].conditioned.kappa",
        "layers[2].conditioned.kappa_attn_input",
        "layers[2].conditioned.mu_la",
    ]
    assert m["embedding.kappa"].value == 30 and m["layers[2].mu_la"].value == 70
    assert m["layers[2].conditioned.kappa_attn_input"].value == 4
    assert m["embedding.kappa_conditioned"].label == "κ(X + 10·I_k)"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        ("[1, 2]", "is not a condcli report (not a JSON object)"),
        ("{}", "has no schema_version: not a condcli report"),
        ('{"schema_version": 2}', "has schema_version 2; this condcli reads 1"),
        ('{"schema_version": 1, "command": "sweep-lambda"}', "is a 'sweep-lambda' report"),
        ('{"schema_version": 1, "command": "spectrum"}', ": model is missing"),
        ('{"schema_version": 1, "command": "spectrum", "model": {"spec": "m"}}', ": embedding is missing"),
        (
            '{"schema_version": 1, "command": "spectrum", "model": {"spec": "m"}, "embedding": {}}',
            ": embedding.kappa is missing",
        ),
    ],
)
def test_malformed_baseline_is_one_input_error(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path / "base.json", content)
    with pytest.raises(InputError) as e:
        load_baseline(path, "median")
    assert e.value.line().startswith(f"--baseline {path}") and message in e.value.line()
    assert "condcli spectrum --json > baseline.json" in e.value.line()


def test_wrong_values_in_a_baseline_are_named_by_path(tmp_path: Path) -> None:
    r = report([10.0], layers=[layer(0, [5], [50])])
    r["layers"][0]["mu_la"]["median"] = "big"
    with pytest.raises(
        InputError, match=r'layers\[0\].mu_la.median is the string \'big\', not a number or "inf"'
    ):
        load_baseline(write(tmp_path / "b.json", json.dumps(r)), "median")
    r["layers"][0]["mu_la"]["median"] = 1.0
    del r["embedding"]["kappa"]["mean"]
    with pytest.raises(InputError, match=r"embedding\.kappa\.mean is missing"):
        load_baseline(write(tmp_path / "b.json", json.dumps(r)), "mean")
    assert load_baseline(tmp_path / "b.json", "median").layer_indices() == [0]
    with pytest.raises(UsageError, match="no such file"):
        load_baseline(tmp_path / "none.json", "median")


# --- JUnit -------------------------------------------------------------------------------------------


def result(rule: str, passed: bool, metric: str = "embedding.kappa") -> CheckResult:
    return CheckResult(
        rule=rule,
        metric=metric,
        label="κ(X)",
        statistic="median",
        value=120.0 if not passed else 80.0,
        limit=100.0,
        passed=passed,
        reason=None if passed else "κ(X) median 120 > 100",
        source="command line",
        baseline=90.0 if rule == "baseline" else None,
    )


def test_junit_has_one_testcase_per_rule_and_metric_with_the_right_counts(tmp_path: Path) -> None:
    results = [
        result("max_kappa", False),
        result("max_mu_la", True),
        result("baseline", True, "embedding.kappa"),
        result("baseline", False, "layers[3].mu_la"),
        result("baseline", True, "layers[3].kappa"),
    ]
    path = tmp_path / "ci" / "junit.xml"
    check_junit_path(path)  # a missing folder is fine: it is made when written
    write_junit(path, junit_xml(results, {"model": "vit-plain"}, 1.5, "2025-01-01T00:00:00+00:00"))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures")) == ("5", "2")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("condcli check", "2", "1", "0"),
        ("condcli baseline", "3", "1", "0"),
    ]
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == [
        "max_kappa: κ(X)",
        "max_mu_la: κ(X)",
        "embedding.kappa: κ(X)",
        "layers[3].mu_la: κ(X)",
        "layers[3].kappa: κ(X)",
    ]
    assert cases[3].get("classname") == "condcli.baseline.layers[3]"
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "κ(X) median 120 > 100"
    assert failure.get("type") == "threshold" and "limit: 100" in (failure.text or "")
    assert len(root.findall(".//failure")) == 2
    props = suites[0].find("properties")
    assert props is not None and props[0].attrib == {"name": "model", "value": "vit-plain"}
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)  # a normal file's mode, not mkstemp's
    assert sorted(p.name for p in path.parent.iterdir()) == ["junit.xml"]


def test_junit_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "junit.xml"
    path.write_text("old")

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(UsageError, match="writing failed"):
        write_junit(path, b"<testsuites/>")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["junit.xml"]


def test_junit_path_is_checked_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_junit_path(tmp_path / "file" / "junit.xml")
    with pytest.raises(UsageError, match="is a folder"):
        check_junit_path(tmp_path)


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
    assert "B adds its own X + λ·I_k with another λ than --lambda" in warnings[-2]


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
