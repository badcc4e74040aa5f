"""The CI gate's configuration: tolerance and limits parsed, [tool.condcli.check] against the command line,
--config, and every malformed or missing file as one usage error."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from condcli.errors import InputError, UsageError
from condcli.gate import config as gc
from tests.gate_reports import write


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
    with pytest.raises(InputError, match=r"latin1\.toml: it is not UTF-8 text"):
        gc.resolve(dict(NONE), bad, tmp_path, explicit=True)
