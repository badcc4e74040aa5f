"""What ``condcli check`` and ``condcli compare`` found, as dataclasses, and their JSON (docs/math.md#json).

A check report is the spectrum report of the fresh analysis (same keys, ``command: "check"``) plus
``statistic``, ``checks``, ``passed``, ``baseline`` and ``warnings``, so it can serve as a baseline itself.
A compare report holds the two spectrum reports under ``a`` and ``b`` and the matched ``metrics``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from condcli.gate.metrics import stable_label
from condcli.numbers import WARN, num
from condcli.numbers import fmt_pair as fmt_pair  # the tables, the gate and the page print pairs alike
from condcli.reports.envelope import envelope
from condcli.reports.spectrum import SpectrumReport
from condcli.reports.views import ReportViews
from condcli.spectra import json_float

fmt = num  # significant digits; inf stays "inf"; None is a dash (the one formatter, condcli.numbers)


def uncertainty_note(rel: float | None) -> str:
    """ " ±70%" where ``rel`` leaves fewer than three digits supported (condcli.numbers.supported_digits),
    else ""."""
    if rel is None or rel < 5e-4:
        return ""
    return " ±" + ("inf" if math.isinf(rel) else f"{rel * 100:.2g}%")


def percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _opt(v: float | None) -> float | str | None:
    return None if v is None else json_float(v)


@dataclass(frozen=True)
class CheckResult:
    """One evaluated rule (or one baseline metric): value against limit."""

    rule: str  # max_kappa | max_mu_la | max_kappa_layer | baseline
    metric: str  # the metric's key in the report, e.g. "embedding.kappa", "layers[3].mu_la"
    label: str  # e.g. "κ(X)"
    statistic: str  # median | mean | max over samples ("value" for a weight κ, a model constant)
    value: float
    limit: float
    passed: bool
    reason: str | None  # why it failed (or a note on a pass); None: a plain pass
    source: str  # where the limit came from: "command line", a config file, or the baseline file
    layer: int | None = None  # the layer the value is from (a layer rule: the worst layer)
    layer_name: str | None = None
    baseline: float | None = None  # baseline metrics: the baseline's value (limit = it × (1 + tolerance))
    improved: bool = False  # baseline metrics: better than the baseline by more than the tolerance
    # the value is only a floor σ_1/tol (docs/math.md#spectra): the true value is at least this
    floor: bool = False
    # the value's relative uncertainty from the capture's rounding, None where not tracked
    # (docs/math.md#digits-a-capture-supports)
    rel_uncertainty: float | None = None

    def shown(self) -> tuple[str, str]:
        """(value, limit) as tables print them: told apart (:func:`fmt_pair`), a floor as "≥ x ⚠", a value
        its capture cannot give to three digits with its uncertainty ("1.2e+07 ±70%")."""
        value, limit = fmt_pair(self.value, self.limit)
        return (f"≥ {value} {WARN}" if self.floor else value + uncertainty_note(self.rel_uncertainty)), limit

    @property
    def title(self) -> str:
        """A stable name (the JUnit testcase name), the same run after run: the rule and what it measures
        (``max_mu_la: μ(LA)``), or a baseline metric's key and what it is (``layers[3].mu_la: μ(LA)``).
        No number of the run (λ, the worst layer, how many layers, a limit) is in it: those are in the
        label, reason and detail; the only digits are a baseline metric's layer index."""
        if self.rule == "baseline":
            return f"{self.metric}: {stable_label(self.metric) or self.label}"
        return f"{self.rule}: {stable_label(self.metric) or self.label}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "metric": self.metric,
            "label": self.label,
            "statistic": self.statistic,
            "value": json_float(self.value),
            "limit": json_float(self.limit),
            "passed": self.passed,
            "reason": self.reason,
            "source": self.source,
            "layer": None if self.layer is None else {"index": self.layer, "name": self.layer_name},
            "floor": self.floor,
        }
        if self.rel_uncertainty is not None:
            out["rel_uncertainty"] = json_float(self.rel_uncertainty)
        if self.rule == "baseline":
            out["baseline"] = _opt(self.baseline)
            out["improved"] = self.improved
        return out


@dataclass(frozen=True)
class BaselineSummary:
    """The baseline a check compared against."""

    path: str | None  # None: given as a report dict
    model: str  # the baseline's model spec
    version: str | None  # condcli that made it
    tolerance: float
    compared: int
    regressed: int
    improved: int

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "model": self.model,
            "condcli_version": self.version,
            "tolerance": self.tolerance,
            "compared": self.compared,
            "regressed": self.regressed,
            "improved": self.improved,
        }


CHECK_KEYS = ("statistic", "config_file", "checks", "passed", "baseline", "warnings")  # what a check adds


def analysis_of(report: Mapping[str, Any]) -> dict[str, Any]:
    """The spectrum report a report holds: a spectrum report itself, or a check report less what the check
    added (so that a saved check report can be checked again)."""
    data = copy.deepcopy(dict(report))
    if data.get("command") == "check":
        data["command"] = "spectrum"
        for key in CHECK_KEYS:
            data.pop(key, None)
    return data


@dataclass(frozen=True)
class CheckReport(ReportViews):
    """What ``condcli check`` found: the analysis (its JSON) and each rule's and baseline metric's result."""

    data: dict[str, Any]  # the spectrum report checked (a fresh analysis's to_json, or a saved one)
    statistic: str
    checks: tuple[CheckResult, ...]
    baseline: BaselineSummary | None
    warnings: tuple[str, ...]
    config_file: str | None
    spectrum: SpectrumReport | None = None  # the analysis run for this check (None: a saved report)
    started: str | None = None  # when the analysis started (UTC, ISO 8601; None: a saved report)
    elapsed_s: float | None = None  # how long it ran

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def rules(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.rule != "baseline")

    @property
    def baseline_checks(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.rule == "baseline")

    def to_json(self) -> dict[str, Any]:
        data = copy.deepcopy(self.data)
        data["command"] = "check"  # same position as in every report (the envelope's third key)
        data.update(
            {
                "statistic": self.statistic,
                "config_file": self.config_file,
                "checks": [c.to_json() for c in self.checks],
                "passed": self.passed,
                "baseline": None if self.baseline is None else self.baseline.to_json(),
                "warnings": list(self.warnings),
            }
        )
        return data


@dataclass(frozen=True)
class CompareRow:
    """One metric of both models; ``ratio`` is B/A (None where undefined: both inf)."""

    key: str
    label_a: str
    label_b: str
    layer: int | None
    name_a: str | None
    name_b: str | None
    a: float
    b: float
    floor_a: bool
    floor_b: bool

    @property
    def ratio(self) -> float | None:
        if math.isinf(self.a):
            return None if math.isinf(self.b) else 0.0
        if self.a == 0:
            return None
        return self.b / self.a

    @property
    def label(self) -> str:
        if self.key == "embedding.seen":
            return f"κ of the tokens the blocks see (A: {self.label_a}; B: {self.label_b})"
        return self.label_a if self.label_a == self.label_b else f"{self.label_a} / {self.label_b}"

    def to_json(self) -> dict[str, Any]:
        names = None if self.layer is None else {"a": self.name_a, "b": self.name_b}
        return {
            "metric": self.key,
            "label": self.label,
            "layer": None if self.layer is None else {"index": self.layer, "name": names},
            "a": json_float(self.a),
            "b": json_float(self.b),
            "ratio": _opt(self.ratio),
            "floor": {"a": self.floor_a, "b": self.floor_b},
        }


@dataclass(frozen=True)
class CompareReport(ReportViews):
    """What ``condcli compare`` found: both analyses (their JSON) and the metrics both have, side by side."""

    a: dict[str, Any]  # A's spectrum report (a fresh analysis's to_json, or a saved one)
    b: dict[str, Any]
    statistic: str
    rows: tuple[CompareRow, ...]
    warnings: tuple[str, ...]
    spectra: tuple[SpectrumReport | None, SpectrumReport | None] = (None, None)  # the analyses run here

    def to_json(self) -> dict[str, Any]:
        return {
            **envelope("compare"),
            "statistic": self.statistic,
            "a": copy.deepcopy(self.a),
            "b": copy.deepcopy(self.b),
            "metrics": [r.to_json() for r in self.rows],
            "warnings": list(self.warnings),
        }
