"""The gateable numbers of a spectrum report (docs/math.md#json JSON), each one statistic over samples.

A metric's ``key`` is a stable path into the report — ``embedding.kappa``, ``layers[3].mu_la``,
``layers[3].conditioned.kappa``, ``layers[3].kappa_wq`` — so a baseline and a fresh run, or two models,
are matched key by key. Which metrics exist, their labels and which way is worse come from the registry
(:mod:`condcli.reports.metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from condcli.reports.metrics import EMBEDDING, FORWARD, WEIGHTS, MetricDef, flag_of

CONDITIONED = ", conditioned"  # the label suffix of a metric of the conditioned forward

Statistic = Literal["median", "mean", "max"]
STATISTICS: tuple[Statistic, ...] = ("median", "mean", "max")


class ReportShapeError(Exception):
    """A report dict lacks a key or holds a value of the wrong kind; ``path`` says where."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path} {problem}")


def number(value: Any, path: str) -> float:
    """A JSON number, or the strings "inf"/"-inf" (docs/math.md#aggregation), as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ReportShapeError(path, f"is {type(value).__name__}, not a number")
    if isinstance(value, str):
        if value not in ("inf", "-inf"):
            raise ReportShapeError(path, f'is the string {value!r}, not a number or "inf"')
        return math.inf if value == "inf" else -math.inf
    try:
        out = float(value)
    except OverflowError:  # an integer with hundreds of digits
        raise ReportShapeError(
            path, 'is too large to be a number (write a singular value as "inf")'
        ) from None
    if math.isnan(out):
        raise ReportShapeError(path, "is NaN")
    return out


def count(value: Any, path: str) -> int:
    """A non-negative JSON integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReportShapeError(path, "is not a count (a non-negative integer)")
    return value


def section(report: Mapping[str, Any], key: str, path: str = "") -> Mapping[str, Any]:
    """``report[key]``, which must be an object."""
    where = f"{path}.{key}" if path else key
    if key not in report:
        raise ReportShapeError(where, "is missing")
    value = report[key]
    if not isinstance(value, Mapping):
        raise ReportShapeError(where, "is not an object")
    return value


def statistic_of(agg: Any, statistic: Statistic, path: str) -> float:
    """One statistic of an aggregate ``{median, mean, min, max, per_sample, inf_count}``."""
    if not isinstance(agg, Mapping):
        raise ReportShapeError(path, "is not an aggregate object")
    if statistic not in agg:
        raise ReportShapeError(f"{path}.{statistic}", "is missing")
    return number(agg[statistic], f"{path}.{statistic}")


@dataclass(frozen=True)
class Metric:
    """One number of one report."""

    key: str  # stable path, e.g. "layers[3].mu_la"
    label: str  # e.g. "μ(LA)"
    value: float  # the statistic over samples (inf allowed); a weight κ is a model constant
    layer: int | None  # None: the embedding
    layer_name: str | None
    floor: bool  # some samples were below the capture dtype's resolution: the value is a floor
    definition: MetricDef  # what it is (registry): which way is worse
    statistic: Statistic = "median"  # which statistic over samples ``value`` is (a weight κ: the value)

    @property
    def where(self) -> str:
        return "X" if self.layer is None else f"layer {self.layer} {self.layer_name}"

    @property
    def title(self) -> str:
        return self.label if self.layer is None else f"{self.where}: {self.label}"

    @property
    def path(self) -> str:
        """Where its value is in the report, e.g. ``layers[3].mu_la.median``."""
        return self.key if self.definition.scope == "weight" else f"{self.key}.{self.statistic}"

    def out_of_range(self) -> str | None:
        """Why the value cannot be this metric's (a κ or μ below 1, an entropy outside [0, 1], …), or None.

        The range is the registry's ``limit_range`` (what a value can be), widened by a rounding margin;
        inf (numerically singular) only where the range is unbounded above.
        """
        low, high = self.definition.limit_range
        margin = 1e-6
        if self.value < low - margin * max(1.0, abs(low)):
            return f"is {self.value:g}, but {self.label} is never below {low:g}"
        if math.isinf(high):
            return None
        if self.value > high + margin * max(1.0, abs(high)):
            return f"is {self.value:g}, but {self.label} is never above {high:g}"
        return None


def stable_label(key: str) -> str | None:
    """The registry's label of the metric at ``key`` (``embedding.kappa_conditioned`` → κ(X + λ·I_k),
    ``layers[3].conditioned.mu_la`` → "μ(LA), conditioned"): what the metric is, never a number of a run
    (λ, a count, a limit). None: not a metric key."""
    scope, _, rest = key.partition(".")
    if scope == "embedding":
        return next((m.label for m in EMBEDDING if m.key == rest), None)
    if not (scope.startswith("layers[") and scope.endswith("]")):
        return None
    conditioned = rest.startswith("conditioned.")
    rest = rest.removeprefix("conditioned.")
    found = [m.label for m in (*FORWARD, *(() if conditioned else WEIGHTS)) if m.key == rest]
    return found[0] + (CONDITIONED if conditioned else "") if found else None


def _lambda_label(report: Mapping[str, Any]) -> str:
    settings = report.get("settings")
    lam = settings.get("lambda") if isinstance(settings, Mapping) else None
    if isinstance(lam, (int, float)) and not isinstance(lam, bool):
        return f"κ(X + {lam:g}·I_k)"
    return "κ(X + λ·I_k)"


def embedding_metrics(report: Mapping[str, Any], statistic: Statistic) -> dict[str, Metric]:
    """κ(X), κ(X + λI_k), κ(X + C); κ(X) is a floor when samples are below precision."""
    emb = section(report, "embedding")
    section(emb, "kappa", "embedding")  # the one section every baseline must have
    below = count(emb.get("below_precision", 0), "embedding.below_precision")
    out: dict[str, Metric] = {}
    for m in EMBEDDING:
        if m.key not in emb:
            continue
        label = _lambda_label(report) if m.key == "kappa_conditioned" else m.label
        value = statistic_of(emb[m.key], statistic, f"embedding.{m.key}")
        floor = m.flag is not None and below > 0
        out[f"embedding.{m.key}"] = Metric(
            f"embedding.{m.key}", label, value, None, None, floor, m, statistic
        )
    return out


def _forward_metrics(
    stats: Mapping[str, Any], prefix: str, index: int, name: str, statistic: Statistic, suffix: str
) -> dict[str, Metric]:
    below = stats.get("below_precision") or {}
    if not isinstance(below, Mapping):
        raise ReportShapeError(f"{prefix}.below_precision", "is not an object")
    out: dict[str, Metric] = {}
    for m in FORWARD:
        if stats.get(m.key) is None:  # absent or null: not observable for this family (or an older report)
            continue
        flag = flag_of(m, stats.get("kappa_mixing") is not None)
        floor = flag is not None and bool(below.get(flag) or 0)
        value = statistic_of(stats[m.key], statistic, f"{prefix}.{m.key}")
        key = f"{prefix}.{m.key}"
        out[key] = Metric(key, m.label + suffix, value, index, name, floor, m, statistic)
    return out


def layer_metrics(layer: Any, position: int, statistic: Statistic) -> dict[str, Metric]:
    """One entry of ``layers``: the plain forward, κ(W), and the conditioned forward where it was run."""
    where = f"layers[{position}]"
    if not isinstance(layer, Mapping):
        raise ReportShapeError(where, "is not an object")
    index = layer.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ReportShapeError(f"{where}.index", "is missing or not a layer index (an integer ≥ 0)")
    name = layer.get("name")
    if not isinstance(name, str):
        raise ReportShapeError(f"{where}.name", "is missing or not a string")
    prefix = f"layers[{index}]"
    out = _forward_metrics(layer, prefix, index, name, statistic, "")
    for m in WEIGHTS:
        if layer.get(m.key) is not None:
            value = number(layer[m.key], f"{prefix}.{m.key}")
            key = f"{prefix}.{m.key}"
            out[key] = Metric(key, m.label, value, index, name, False, m, statistic)
    cond = layer.get("conditioned")
    if cond is not None:
        if not isinstance(cond, Mapping):
            raise ReportShapeError(f"{prefix}.conditioned", "is not an object")
        out.update(_forward_metrics(cond, f"{prefix}.conditioned", index, name, statistic, CONDITIONED))
    return out


def report_layers(report: Mapping[str, Any]) -> list[Any]:
    layers = report.get("layers", [])
    if layers is None:
        return []
    if not isinstance(layers, list):
        raise ReportShapeError("layers", "is not a list")
    return layers


def extract_metrics(report: Mapping[str, Any], statistic: Statistic) -> dict[str, Metric]:
    """Every metric of a spectrum (or check) report, in report order."""
    out = embedding_metrics(report, statistic)
    seen: set[int] = set()
    for position, layer in enumerate(report_layers(report)):
        found = layer_metrics(layer, position, statistic)
        index = layer["index"]
        if index in seen:
            raise ReportShapeError(f"layers[{position}].index", f"is {index}, which an earlier layer has too")
        seen.add(index)
        out.update(found)
    return out
