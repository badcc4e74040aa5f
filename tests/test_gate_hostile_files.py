"""Hostile baselines and check configs: a value no metric can take (κ = −5, an entropy of 1.5), an integer
too large for a float, deep nesting, a path the file system refuses — each one exit-2 line naming the file
and the key, never a regression (exit 1), an OverflowError or a RecursionError (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from condcli.cli import main
from condcli.errors import InputError, UsageError
from condcli.gate import config as gc
from condcli.gate.baseline import load_baseline
from tests.gate_reports import agg, layer, report, write

NONE = dict.fromkeys(gc.KEYS)


def with_layer(**changes: Any) -> dict[str, Any]:
    """A baseline with one layer 0, its entries replaced by ``changes``."""
    one = layer(0, [5.0], [50.0])
    one.update(attention_entropy=agg([0.5]), stable_rank=agg([3.0]))
    one.update(changes)
    return report([10.0], layers=[one])


def minus_inf() -> dict[str, Any]:
    data = report([10.0])
    data["embedding"]["kappa"]["median"] = "-inf"  # docs/math.md#aggregation spells ±inf as strings
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (report([-5.0]), "embedding.kappa.median is -5, but κ(X) is never below 1"),
        (report([0.5]), "embedding.kappa.median is 0.5, but κ(X) is never below 1"),
        (minus_inf(), "embedding.kappa.median is -inf, but κ(X) is never below 1"),
        (with_layer(mu_la=agg([0.0])), "layers[0].mu_la.median is 0, but μ(LA) is never below 1"),
        (with_layer(kappa_wq=-3.0), "layers[0].kappa_wq is -3, but κ(W_Q) is never below 1"),
        (
            with_layer(attention_entropy=agg([1.5])),
            "layers[0].attention_entropy.median is 1.5, but H(P) is never above 1",
        ),
        (
            with_layer(attention_entropy=agg([-0.25])),
            "layers[0].attention_entropy.median is -0.25, but H(P) is never below 0",
        ),
        (
            with_layer(attention_entropy=agg([float("inf")])),
            "layers[0].attention_entropy.median is inf, but H(P) is never above 1",
        ),
        (
            with_layer(stable_rank=agg([0.5])),
            "layers[0].stable_rank.median is 0.5, but srank(X_l) is never below 1",
        ),
    ],
)
def test_a_value_the_metric_cannot_take_is_a_malformed_baseline(
    tmp_path: Path, data: dict[str, Any], message: str
) -> None:
    path = write(tmp_path / "b.json", json.dumps(data))
    with pytest.raises(InputError) as e:
        load_baseline(path, "median")
    assert e.value.line().startswith(f"baseline={path}: ") and message in e.value.line()


def test_values_at_the_ends_of_a_range_up_to_rounding_are_accepted(tmp_path: Path) -> None:
    data = with_layer(attention_entropy=agg([1.0 + 1e-12]), stable_rank=agg([1.0 - 1e-12]), mu_la=agg([1.0]))
    data["embedding"]["kappa"] = agg([float("inf")])  # numerically singular: inf is a κ
    metrics = load_baseline(write(tmp_path / "b.json", json.dumps(data)), "median").metrics
    assert metrics["layers[0].attention_entropy"].value == 1.0 + 1e-12


def test_a_kappa_of_minus_5_is_exit_2_not_a_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "b.json", json.dumps(report([-5.0])))
    capfd.readouterr()
    assert main(["check", "vit-plain", "--max-samples", "2", "--baseline", "b.json"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("error: --baseline b.json: embedding.kappa.median is -5") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            json.dumps(report([10.0])).replace('"median": 10.0', '"median": 1' + "0" * 400, 1),
            "is too large to be a number",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"schema_version": ' + "9" * 5000 + "}", "integer with thousands of digits"),
        (json.dumps(with_layer(index=-1)), "layers[0].index is missing or not a layer index"),
        (
            json.dumps(report([10.0], layers=[layer(2, [5.0], [50.0]), layer(2, [6.0], [60.0])])),
            "layers[1].index is 2, which an earlier layer has too",
        ),
    ],
    ids=["huge-integer", "deep-nesting", "integer-digits", "negative-layer", "duplicate-layer"],
)
def test_hostile_baseline_text_is_one_input_error(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "b.json", text)
    with pytest.raises(InputError) as e:
        load_baseline(path, "median")
    assert e.value.line().startswith(f"baseline={path}") and message in e.value.line()
    assert "condcli spectrum --json > baseline.json" in e.value.line()


def test_a_baseline_path_the_file_system_refuses_is_one_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a usable path"):  # a name over 255 bytes: ENAMETOOLONG
        load_baseline(tmp_path / ("x" * 300 + ".json"), "median")
    config = write(tmp_path / "c.toml", '[tool.condcli.check]\nbaseline = "b\\u0000.json"\n')
    cfg = gc.resolve(dict(NONE), config, tmp_path, explicit=True)
    assert cfg.baseline is not None
    with pytest.raises(UsageError, match="no such file"):  # a NUL byte: no file has that name
        load_baseline(cfg.baseline, "median")


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (
            "[tool.condcli.check]\nmax_kappa = " + "[" * 100_000 + "]" * 100_000 + "\n",
            InputError,
            "nested too deeply",
        ),
        (
            "[tool.condcli.check]\nmax_kappa = 1" + "0" * 400 + "\n",
            UsageError,
            "must be a finite number, got an integer too large",
        ),
        (
            "[tool.condcli.check]\nmin_attention_entropy = 1" + "0" * 400 + "\n",
            UsageError,
            "must be a finite number",
        ),
        ("[tool.condcli.check]\nmax_kappa = 3\n[tool.condcli.check\n", InputError, "invalid TOML"),
        ("[tool.condcli.check]\nmax_kappa = 'caf\xe9'\n", InputError, "not UTF-8"),
    ],
    ids=["deep-nesting", "huge-integer", "huge-entropy", "invalid", "latin1"],
)
def test_hostile_check_config_is_one_line(
    tmp_path: Path, text: str, error: type[UsageError | InputError], message: str
) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(text.encode("latin-1" if "\xe9" in text else "utf-8"))
    with pytest.raises(error) as e:
        gc.resolve(dict(NONE), path, tmp_path, explicit=True)
    assert message in e.value.line() and str(path) in e.value.line() and "\n" not in e.value.line()


def test_a_config_path_the_file_system_refuses_is_one_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a usable path"):
        gc.resolve(dict(NONE), tmp_path / ("c" * 300 + ".toml"), tmp_path, explicit=True)
