"""``check`` gates what the metric registry declares: lower-is-worse metrics get a minimum, baselines regress
the right way, and every registry metric reaches the JSON, the table and the options."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from condcli.gate.config import LIMITS
from condcli.reports.metrics import EMBEDDING, FORWARD, GATES, WEIGHTS

ARGS = ("bert-docstrings", "--max-samples", "3", "--layers", "all")


@pytest.fixture(scope="module")
def spectrum(cli_json: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    return cli_json("spectrum", *ARGS, "--no-conditioned")


def _worst(report: dict[str, Any], key: str) -> float:
    values = [layer[key]["median"] for layer in report["layers"]]
    return min(values) if GATES[f"min_{key}"].worse == "lower" else max(values)


@pytest.mark.parametrize("key", ["attention_entropy", "stable_rank"])
def test_a_lower_is_worse_rule_fails_below_its_minimum(
    key: str, spectrum: dict[str, Any], cli: Callable[..., Any]
) -> None:
    worst = _worst(spectrum, key)
    option = GATES[f"min_{key}"].option
    assert option is not None
    above = cli("check", *ARGS, option, f"{worst * 1.02:.6g}", "--json")
    assert above.exit_code == 1, above.output
    result = json.loads(above.stdout)["checks"][0]
    assert result["rule"] == f"min_{key}" and not result["passed"]
    np.testing.assert_allclose(result["value"], worst, rtol=1e-12)  # the worst = the lowest layer
    assert "<" in result["reason"]
    below = cli("check", *ARGS, option, f"{worst * 0.98:.6g}", "--json")
    assert below.exit_code == 0, below.output


def test_limits_outside_a_metrics_range_are_one_clear_error(cli: Callable[..., Any]) -> None:
    for option, value, said in (
        ("--min-attention-entropy", "1.5", "≤ 1"),
        ("--min-attention-entropy", "-0.1", "≥ 0"),
        ("--min-stable-rank", "0.5", "≥ 1"),
        ("--max-mu-la", "0.5", "≥ 1"),
    ):
        result = cli("check", *ARGS, option, value)
        assert result.exit_code == 2, (option, value, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and option in lines[0] and said in lines[0]


def test_a_baseline_regresses_when_a_lower_is_worse_metric_drops(
    spectrum: dict[str, Any], cli: Callable[..., Any], tmp_path: Path
) -> None:
    highest = max(layer["attention_entropy"]["median"] for layer in spectrum["layers"])
    assert highest < 0.99
    tolerance = f"{(1 - highest) / 2:.6f}"  # a baseline of 1 (an entropy's highest) is then past it
    for name, old, code in (("higher", lambda now: 1.0, 1), ("lower", lambda now: now * 0.8, 0)):
        base = json.loads(json.dumps(spectrum))
        for layer in base["layers"]:
            layer["attention_entropy"]["median"] = old(layer["attention_entropy"]["median"])
        path = tmp_path / f"base-{name}.json"
        path.write_text(json.dumps(base), encoding="utf-8")
        args = ("--no-conditioned", "--baseline", str(path), "--tolerance", tolerance, "--json")
        result = cli("check", *ARGS, *args)
        assert result.exit_code == code, result.output
        checks = json.loads(result.stdout)["checks"]
        entropy = [c for c in checks if c["metric"].endswith(".attention_entropy")]
        assert len(entropy) == len(spectrum["layers"])
        assert all(c["passed"] == (code == 0) for c in entropy)
        assert all(c["improved"] == (code == 0) for c in entropy)
        others = [c for c in checks if not c["metric"].endswith(".attention_entropy")]
        assert others and all(c["passed"] and not c["improved"] for c in others)


def test_every_registry_metric_reaches_json_table_and_options(
    spectrum: dict[str, Any], cli: Callable[..., Any]
) -> None:
    layer = spectrum["layers"][0]
    assert all(m.key in layer for m in FORWARD) and all(m.key in layer for m in WEIGHTS)
    assert all(m.key in spectrum["embedding"] for m in EMBEDDING)
    assert set(layer["below_precision"]) == {m.flag for m in FORWARD if m.flag}
    table = cli("spectrum", *ARGS, "--layers", "0", "--wide")
    assert table.exit_code == 0
    header = next(line for line in table.stdout.splitlines() if "κ(X_l)" in line and "layer" in line)
    # a column of the mixing matrix M shows only where a layer has one (tests/test_shaped_attention.py), one
    # over the distinct rows only where some differ (a ViT's rows are distinct: tests/test_repeated_rows.py)
    shown = [m for m in (*FORWARD, *WEIGHTS) if m.column and not m.needs_mixing and m.shadow_of is None]
    assert all(m.column in header for m in shown)
    from typer.testing import CliRunner

    from condcli.cli import app

    wide = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "240", "TERMINAL_WIDTH": "240"})
    helptext = wide.stdout
    assert set(LIMITS) == set(GATES)
    for rule, m in GATES.items():
        assert m.option is not None and f"{m.option} " in helptext, rule
    nothing = cli("check", "bert-docstrings")
    assert nothing.exit_code == 2
    assert all(str(m.option) in nothing.stderr for m in GATES.values())
