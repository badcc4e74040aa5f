"""Baselines for the CI gate on hand-made report dicts: regressions fail and improvements do not, layers
matched by index and name, context differences as warnings, and malformed baselines as one clear error."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from condcli.errors import InputError, UsageError
from condcli.gate.baseline import compare_baseline, compare_one, context_warnings, load_baseline
from condcli.gate.metrics import Metric, extract_metrics
from condcli.reports.metrics import EMBEDDING, FORWARD, WEIGHTS
from tests.gate_reports import agg, layer, report, write


def metric(key: str, value: float, layer: int | None = None, name: str | None = None) -> Metric:
    """A metric of the report, its definition (which way is worse) from the registry by its key."""
    short = key.rsplit(".", 1)[-1]
    scoped = EMBEDDING if key.startswith("embedding.") else (*FORWARD, *WEIGHTS)
    return Metric(key, key, value, layer, name, False, next(m for m in scoped if m.key == short))


@pytest.mark.parametrize(
    ("old", "new", "passed", "improved", "reason"),
    [
        (0.5, 0.45, True, False, None),  # exactly old·(1 − 10%): not a regression
        (0.5, 0.4499, False, False, "regressed: 0.4499 < baseline 0.5 − 10% (×0.9)"),
        (0.5, 0.6, True, True, "improved: 0.6 from baseline 0.5 (×1.2)"),
        (0.5, 0.52, True, False, None),  # better, within the tolerance
    ],
)
def test_a_lower_is_worse_metric_regresses_when_it_drops(
    old: float, new: float, passed: bool, improved: bool, reason: str | None
) -> None:
    r = compare_one(
        metric("layers[0].attention_entropy", old, 0, "b0"),
        metric("layers[0].attention_entropy", new, 0, "b0"),
        0.1,
        "median",
        "b.json",
    )
    assert (r.passed, r.improved, r.reason) == (passed, improved, reason)
    assert r.limit == pytest.approx(0.45)


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
        "layer(s) 2 of the baseline were not analysed now: not compared (pass `layers` to choose them)",
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
        (
            "{not json",
            ": invalid JSON at line 1, column 2: Expecting property name enclosed in double quotes",
        ),
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
    assert e.value.line().startswith(f"baseline={path}") and message in e.value.line()
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
