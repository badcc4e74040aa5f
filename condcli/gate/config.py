"""What ``condcli check`` gates on: limits, statistic, baseline and tolerance, from the command line and
``[tool.condcli.check]`` in pyproject.toml (read with tomllib). The command line wins, key by key.

Every problem is a :class:`UsageError` (exit 2) that names the key, the file and what to write instead.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from condcli.errors import UsageError
from condcli.gate.metrics import STATISTICS, Statistic
from condcli.parsing import read_toml
from condcli.reports.metrics import GATES, MetricDef

LIMITS: dict[str, str] = {rule: m.option or rule for rule, m in GATES.items()}  # config key → option
KEYS: tuple[str, ...] = (*LIMITS, "statistic", "baseline", "tolerance")
DEFAULT_TOLERANCE = 0.10
DEFAULT_STATISTIC: Statistic = "median"
COMMAND_LINE = "command line"
EXAMPLE = "[tool.condcli.check] with max_kappa = 200"


@dataclass(frozen=True)
class CheckConfig:
    """The resolved gate. ``sources`` says where each set key came from (command line or a file)."""

    limits: dict[str, float]  # rule name (a LIMITS key) → limit; only the rules asked for
    statistic: Statistic = DEFAULT_STATISTIC
    baseline: Path | None = None
    tolerance: float = DEFAULT_TOLERANCE
    sources: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None  # the file read, if any

    @property
    def empty(self) -> bool:
        return not self.limits and self.baseline is None


def parse_tolerance(value: Any, where: str) -> float:
    """``"10%"`` → 0.1 (a percentage), ``0.1`` or ``"0.1"`` → 0.1 (a fraction, below 1)."""
    hint = "write a percentage such as 10% or a fraction below 1 such as 0.1"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UsageError(f"{where} must be a percentage or a fraction, got {value!r}", hint)
    text = str(value).strip()
    percent = text.endswith("%")
    try:
        number = float(text.removesuffix("%").strip())
    except ValueError:
        raise UsageError(f"{where} {text!r} is not a number", hint) from None
    if not math.isfinite(number) or number < 0:
        raise UsageError(f"{where} {text!r} must be a finite number ≥ 0", hint)
    if percent:
        return number / 100
    if number >= 1:
        raise UsageError(
            f"{where} {text!r} is ambiguous: a bare number is a fraction (0.1 = 10%)",
            f"write {number:g}% for {number:g} percent, or e.g. 150% for a fraction of 1.5",
        )
    return number


def check_limit(value: Any, where: str, metric: MetricDef | None = None) -> float:
    """A limit within the metric's ``limit_range`` (default: a condition number or μ, a finite number ≥ 1,
    since every κ is ≥ 1)."""
    low, high = metric.limit_range if metric is not None else (1.0, math.inf)
    example = "e.g. 200 or 1e9" if math.isinf(high) else f"e.g. {(low + high) / 2:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where} must be a number, got {value!r}", example)
    try:
        number = float(value)
    except OverflowError:  # an integer with hundreds of digits
        raise UsageError(
            f"{where} must be a finite number, got an integer too large for one", example
        ) from None
    if not math.isfinite(number):
        raise UsageError(f"{where} must be a finite number, got {value!r}", example)
    if number < low:  # say what the metric is: a sink score is a probability mass, not a condition number
        plain = metric is None or (metric.worse == "higher" and math.isinf(high))  # κ, μ
        what = "a condition number" if plain or metric is None else metric.label
        bounds = "" if math.isinf(high) else f" (it lies between {low:g} and {high:g})"
        raise UsageError(
            f"{where} must be ≥ {low:g}, got {value!r}",
            f"{what} is never below {low:g}{bounds}, so such a limit could never pass",
        )
    if number > high:
        raise UsageError(
            f"{where} must be ≤ {high:g}, got {value!r}",
            f"{metric.label if metric else 'it'} is never above {high:g}, so such a limit could never pass",
        )
    return number


def check_statistic(value: Any, where: str) -> Statistic:
    if value not in STATISTICS:
        raise UsageError(f"{where} {value!r} is not known", f"use one of {', '.join(STATISTICS)}")
    return cast(Statistic, value)


def read_check_table(path: Path, explicit: bool) -> dict[str, Any]:
    """``[tool.condcli.check]`` of ``path`` ({} without one). ``explicit``: the file must exist."""
    hint = "give the path of a pyproject.toml-style file"
    try:
        exists, is_file = path.exists(), path.is_file()
    except (OSError, ValueError) as e:  # a name too long for the file system
        raise UsageError(f"`config={path}`: not a usable path ({e})", hint) from None
    if not exists:
        if explicit:
            raise UsageError(f"`config={path}`: no such file", hint)
        return {}
    if not is_file:
        raise UsageError(f"`config={path}` is not a file", hint)
    data = read_toml(path, str(path), "fix the file (UTF-8 TOML, e.g. " + EXAMPLE + ")")
    table: Any = data
    for key in ("tool", "condcli", "check"):
        if not isinstance(table, dict):
            break
        table = table.get(key, {})
    if not isinstance(table, dict):
        raise UsageError(f"[tool.condcli.check] in {path} is not a table", f"write it as {EXAMPLE}")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], KEYS, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"[tool.condcli.check] in {path}: unknown key {unknown[0]!r}",
            f"{guess}valid keys: {', '.join(KEYS)}",
        )
    return table


def resolve(
    cli: dict[str, Any], config_path: Path | None, cwd: Path, *, explicit: bool = False
) -> CheckConfig:
    """Merge command-line values (None: not given) over the file's table, checking every value.

    ``cli`` has the keys of :data:`KEYS`. A baseline path from a file is relative to that file's folder.
    """
    path = config_path if config_path is not None else cwd / "pyproject.toml"
    table = read_check_table(path, explicit)
    file_label = str(path)
    sources: dict[str, str] = {}
    chosen: dict[str, Any] = {}
    for key in KEYS:
        if cli.get(key) is not None:
            chosen[key], sources[key] = cli[key], COMMAND_LINE
        elif key in table:
            chosen[key], sources[key] = table[key], file_label

    def where(key: str) -> str:
        if sources[key] == COMMAND_LINE:
            return f"`{key}`"  # the parameter; the CLI shows its flag
        return f"[tool.condcli.check] {key} in {file_label}"

    limits = {key: check_limit(chosen[key], where(key), GATES[key]) for key in LIMITS if key in chosen}
    statistic = (
        check_statistic(chosen["statistic"], where("statistic"))
        if "statistic" in chosen
        else DEFAULT_STATISTIC
    )
    tolerance = (
        parse_tolerance(chosen["tolerance"], where("tolerance"))
        if "tolerance" in chosen
        else DEFAULT_TOLERANCE
    )
    baseline = None
    if "baseline" in chosen:
        value = chosen["baseline"]
        if isinstance(value, Path):
            baseline = value
        elif isinstance(value, str) and value.strip():
            baseline = (path.parent if sources["baseline"] != COMMAND_LINE else cwd) / value
        else:
            raise UsageError(f"{where('baseline')} must be a file path", 'e.g. baseline = "baseline.json"')
    return CheckConfig(
        limits=limits,
        statistic=statistic,
        baseline=baseline,
        tolerance=tolerance,
        sources=sources,
        config_file=path if path.is_file() else None,
    )
