"""Baselines for ``check``'s ``baseline`` file: a spectrum report in its docs/math.md#json JSON (or a
check's), loaded and validated, then compared metric by metric with a fresh run.

Which way is worse comes from the metric registry (:mod:`condcli.reports.metrics`). With tolerance t, a
higher-is-worse metric (a κ or μ) regresses when new > old·(1 + t) and counts as improved (reported, never
failed) when new·(1 + t) < old; a lower-is-worse one (attention entropy, stable rank) regresses when
new < old·(1 − t) and improves when new·(1 − t) > old. inf (numerically singular) is explicit: inf
now and finite in the baseline is a regression; inf on both sides is not. Layers are matched by index and
name; metrics on only one side are warned about and not compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condcli.errors import InputError, UsageError
from condcli.gate.metrics import Metric, ReportShapeError, Statistic, extract_metrics, section
from condcli.gate.report import CheckResult, fmt, percent
from condcli.parsing import read_json
from condcli.reports.schema import SCHEMA_VERSION

MAKE_ONE = "make one with: condcli spectrum --json > baseline.json"
# (path, what it is) of the context a baseline records; check warns when they differ
CONTEXT: tuple[tuple[str, str], ...] = (
    ("model.spec", "model"),
    ("model.weights", "weights"),
    ("model.num_layers", "number of layers"),
    ("tool.version", "condcli version"),
    ("tool.torch", "torch version"),
    ("settings.dtype", "dtype"),
    ("settings.device", "device"),
    ("settings.seed", "seed"),
    ("settings.lambda", "λ"),
    ("inputs.kind", "input kind"),
    ("inputs.count", "number of samples"),
    ("inputs.description", "inputs"),
)


@dataclass(frozen=True)
class Baseline:
    path: Path | None  # None: given as a report dict, not read from a file
    report: dict[str, Any]
    metrics: dict[str, Metric]

    @property
    def model(self) -> str:
        return str(self.report["model"]["spec"])

    @property
    def version(self) -> str | None:
        tool = self.report.get("tool")
        version = tool.get("version") if isinstance(tool, Mapping) else None
        return version if isinstance(version, str) else None

    @property
    def source(self) -> str:
        """Where its limits come from, as a check result's ``source`` says."""
        return "the baseline given" if self.path is None else str(self.path)

    def layer_indices(self) -> list[int]:
        """The layers the baseline has metrics for, in order."""
        return sorted({m.layer for m in self.metrics.values() if m.layer is not None})

    def has_conditioned_forward(self) -> bool:
        return any(".conditioned." in key for key in self.metrics)


def load_baseline(path: Path, statistic: Statistic) -> Baseline:
    """Read and validate ``path``; every problem is one exit-2 line that names the file and the key: its
    JSON (read with :func:`condcli.parsing.read_json`), its shape, and each compared value within what the
    metric can be (a κ or μ is ≥ 1, an entropy within [0, 1], …)."""
    where = f"`baseline={path}`"
    try:
        exists, is_file = path.exists(), path.is_file()
    except (OSError, ValueError) as e:  # a name too long, a NUL byte in a path from a config file
        raise UsageError(f"{where}: not a usable path ({e})", MAKE_ONE) from None
    if not exists:
        raise UsageError(f"{where}: no such file", MAKE_ONE)
    if not is_file:
        raise UsageError(f"{where} is not a file", MAKE_ONE)
    return baseline_of(read_json(path, where, MAKE_ONE), statistic, where, path)


def spectrum_report(data: Any, where: str, what: str = "baseline") -> dict[str, Any]:
    """``data`` if it is a spectrum (or check) report of this condcli's schema (:class:`InputError` naming
    ``where`` otherwise); ``what`` it serves as: a baseline, or a report to check."""
    hint = f"make one with: condcli spectrum --json > {what}.json"
    if not isinstance(data, dict):
        raise InputError(f"{where} is not a condcli report (not a JSON object)", hint)
    version = data.get("schema_version")
    if version is None:
        raise InputError(f"{where} has no schema_version: not a condcli report", hint)
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{where} has schema_version {version!r}; this condcli reads {SCHEMA_VERSION}",
            f"make the {what} again with this condcli: condcli spectrum --json > {what}.json",
        )
    command = data.get("command")
    if command not in ("spectrum", "check"):
        raise InputError(f"{where} is a {command!r} report; a {what} is a spectrum (or check) report", hint)
    return data


def baseline_of(
    data: Any, statistic: Statistic, where: str = "`baseline`", path: Path | None = None
) -> Baseline:
    """A baseline from a report's JSON (read from ``path``, or given as a dict), validated: its shape and
    each compared value within what the metric can be."""
    report = spectrum_report(data, where)
    try:
        model = section(report, "model")
        if not isinstance(model.get("spec"), str):
            raise ReportShapeError("model.spec", "is missing or not a string")
        metrics = extract_metrics(report, statistic)
    except ReportShapeError as e:
        raise InputError(f"{where}: {e.path} {e.problem}", MAKE_ONE) from None
    for metric in metrics.values():
        problem = metric.out_of_range()
        if problem is not None:
            raise InputError(f"{where}: {metric.path} {problem}", MAKE_ONE)
    return Baseline(path, report, metrics)


def _get(report: Mapping[str, Any], dotted: str) -> Any:
    value: Any = report
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def context_warnings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per recorded circumstance (model, versions, dtype, device, seed, inputs) that differs."""
    out = []
    for path, what in CONTEXT:
        a, b = _get(old, path), _get(new, path)
        if a is None or b is None or a == b:
            continue
        if path == "inputs.description" and _get(old, "inputs.count") != _get(new, "inputs.count"):
            continue  # the description names the count: one line about it is enough
        line = f"the baseline's {what} differs: {a!r} there, {b!r} now"
        if path == "model.num_layers":
            line += " — only the layers both have are compared"
        out.append(line)
    return out


def compare_one(old: Metric, new: Metric, tolerance: float, statistic: str, source: str) -> CheckResult:
    """One metric: a regression fails, anything else passes (an improvement is noted)."""
    metric = new.definition
    limit = old.value * (1 + tolerance) if metric.worse == "higher" else old.value * (1 - tolerance)
    regressed = metric.regressed(old.value, new.value, tolerance)  # inf now, finite before: regressed
    improved = metric.improved(old.value, new.value, tolerance)
    ratio = math.inf if math.isinf(new.value) else (new.value / old.value if old.value else math.nan)
    change = "" if math.isinf(old.value) or math.isnan(ratio) else f" (×{fmt(ratio)})"
    floor = " (a floor: samples below the capture dtype's resolution)" if new.floor or old.floor else ""
    if regressed and math.isinf(new.value):
        reason: str | None = f"now numerically singular (inf); baseline {fmt(old.value, 4)}"
    elif regressed:
        reason = (
            f"regressed: {fmt(new.value, 4)} {'>' if metric.worse == 'higher' else '<'} baseline "
            f"{fmt(old.value, 4)} {'+' if metric.worse == 'higher' else '−'} {percent(tolerance)}"
            f"{change}{floor}"
        )
    elif improved:
        reason = f"improved: {fmt(new.value, 4)} from baseline {fmt(old.value, 4)}{change}"
    elif math.isinf(new.value):
        reason = "numerically singular (inf) in the baseline too"
    else:
        reason = None
    return CheckResult(
        rule="baseline",
        metric=new.key,
        label=new.label,
        statistic="value" if metric.scope == "weight" else statistic,
        value=new.value,
        limit=limit,
        passed=not regressed,
        reason=reason,
        source=source,
        layer=new.layer,
        layer_name=new.layer_name,
        baseline=old.value,
        improved=improved,
    )


def _listing(items: list[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", … ({len(items) - limit} more)" if len(items) > limit else "")


def _layer_names(metrics: Mapping[str, Metric]) -> dict[int, str]:
    return {m.layer: m.layer_name or "" for m in metrics.values() if m.layer is not None}


def compare_baseline(
    old: Mapping[str, Metric], new: Mapping[str, Metric], tolerance: float, statistic: str, source: str
) -> tuple[list[CheckResult], list[str]]:
    """(one result per metric both sides have, in the new report's order; warnings about the rest)."""
    warnings: list[str] = []
    old_layers, new_layers = _layer_names(old), _layer_names(new)
    renamed = {i for i in old_layers.keys() & new_layers.keys() if old_layers[i] != new_layers[i]}
    for i in sorted(renamed):
        warnings.append(
            f"layer {i} is {old_layers[i]!r} in the baseline and {new_layers[i]!r} now: not compared"
        )
    only_old = sorted(old_layers.keys() - new_layers.keys())
    only_new = sorted(new_layers.keys() - old_layers.keys())
    if only_old:
        warnings.append(
            f"layer(s) {_listing([str(i) for i in only_old])} of the baseline were not analysed now: "
            "not compared (pass `layers` to choose them)"
        )
    if only_new:
        warnings.append(
            f"layer(s) {_listing([str(i) for i in only_new])} are not in the baseline: not compared"
        )
    skip = renamed | set(only_old) | set(only_new)
    results = []
    for key, metric in new.items():
        if metric.layer in skip:
            continue
        if key in old:
            results.append(compare_one(old[key], metric, tolerance, statistic, source))
    lone_old = [k for k, m in old.items() if m.layer not in skip and k not in new]
    lone_new = [k for k, m in new.items() if m.layer not in skip and k not in old]
    if lone_old:
        warnings.append(f"{len(lone_old)} baseline metric(s) not measured now: {_listing(lone_old)}")
    if lone_new:
        warnings.append(f"{len(lone_new)} metric(s) not in the baseline: {_listing(lone_new)}")
    return results, warnings
