"""The threshold rules of ``condcli check``, evaluated on a fresh spectrum report (docs/math.md#json JSON).

- ``max_kappa``: κ of the embedded tokens the blocks compute with — κ(X) for a plain model; for a model
  that adds its own X + λ·I_k (or X + C) at X, κ of that sum — as the chosen statistic over samples.
- every per-layer metric with a gate in the registry (:mod:`condcli.reports.metrics`): ``max_kappa_layer``
(κ(X_l)),
  ``max_mu_la`` (μ(LA), max over heads), ``min_attention_entropy`` (H(P), lowest head),
  ``min_stable_rank`` (of X_l) — on the plain forward, the worst of the analysed layers. A higher-is-worse
  metric's limit is a maximum, a lower-is-worse one's a minimum.

A value exactly at its limit passes. A κ that is inf (numerically singular) or measured on samples below
the capture dtype's resolution (a floor, not a measurement: docs/math.md#spectra) fails, with that reason.
Floors are treated as floors: a floor above a maximum fails (the reason shows "≥ value > limit": the true
value is at least that); a floor at or below a maximum cannot pass either, since the true value may lie above
the limit — it fails with the below-resolution reason, as does any statistic over samples some of which are
floors (even a median the report marks exact: the gate does not pass what it cannot see).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from condcli.conditioning import Conditioning
from condcli.errors import UsageError
from condcli.gate.config import LIMITS, CheckConfig
from condcli.gate.metrics import Statistic, count, report_layers, section, statistic_of
from condcli.gate.report import CheckResult, fmt_pair, uncertainty_note
from condcli.numbers import rel_uncertainty
from condcli.reports.metrics import FLAG_SUBJECT, GATES, MetricDef

# rule → its per-layer metric (every gate of the registry but max_kappa, which is on X)
LAYER_RULES: dict[str, MetricDef] = {rule: m for rule, m in GATES.items() if m.scope == "forward"}


def seen_key(builtin: Conditioning | None, lam: float) -> str | None:
    """The embedding key of what the blocks see: ``kappa`` (plain), ``kappa_conditioned`` (the model's own
    shift, when the report's λ is the model's λ), ``kappa_corrected`` (its own X + C); None: not measured."""
    if builtin is None:
        return "kappa"
    if builtin.mode == "correction":
        return "kappa_corrected"
    return "kappa_conditioned" if builtin.lam == lam else None


def seen_key_of(report: Mapping[str, Any]) -> str | None:
    """:func:`seen_key` of a saved report, read from what it records: the model's own conditioning at X
    (``embedding.model_conditioning``, as :meth:`Conditioning.describe` wrote it) and the run's λ."""
    own = section(report, "embedding").get("model_conditioning")
    if own is None:
        return "kappa"
    if own == Conditioning(1.0, "correction").describe():
        return "kappa_corrected"
    lam = section(report, "settings").get("lambda")
    if not isinstance(lam, int | float) or isinstance(lam, bool) or not math.isfinite(lam):
        return None
    return "kappa_conditioned" if own == Conditioning(float(lam), "shift").describe() else None


def _precision(inf: int, below: int, n: int, dtype: str, what: str, where: str = "") -> list[str]:
    """The docs/math.md#spectra reasons: singular samples, and samples whose κ is only a floor."""
    out = []
    at = f" in {where}" if where else ""
    if inf:
        out.append(f"{what} is numerically singular (κ = inf){at} in {inf} of {n} samples")
    if below > inf:
        out.append(
            f"{what} is below {dtype} resolution{at} in {below - inf} of {n} samples "
            "(its κ is a floor, not a measurement)"
        )
    if out and dtype != "float64":
        out[-1] += " — rerun with `dtype=float64`"
    return out


def _label(report: Mapping[str, Any], key: str) -> str:
    if key == "kappa":
        return "κ(X)"
    if key == "kappa_corrected":
        return "κ(X + C), the model's own correction"
    lam = section(report, "settings").get("lambda")
    return f"κ(X + {lam:g}·I_k), the model's own shift"


def kappa_rule(
    report: Mapping[str, Any], limit: float, statistic: Statistic, key: str, source: str
) -> CheckResult:
    """``max_kappa`` on the embedding section (``key``: see :func:`seen_key`)."""
    emb = section(report, "embedding")
    agg = section(emb, key, "embedding")
    value = statistic_of(agg, statistic, f"embedding.{key}")
    n = count(section(report, "inputs").get("count", 0), "inputs.count")
    inf = count(agg.get("inf_count", 0), f"embedding.{key}.inf_count")
    # samples below precision are flagged for X itself; X + λI_k / X + C are judged by inf alone
    below = count(emb.get("below_precision", 0), "embedding.below_precision") if key == "kappa" else inf
    dtype = str(emb.get("resolution_dtype") or emb.get("capture_dtype", "the capture dtype"))
    what = "X" if key == "kappa" else "the conditioned X"
    label = _label(report, key)
    reasons = []
    if value > limit:
        shown, lim = fmt_pair(value, limit)
        floor = statistic_is_floor(agg, statistic)
        shown = (
            ("≥ " if floor else "")
            + shown
            + ("" if floor else uncertainty_note(rel_uncertainty(agg, statistic)))
        )
        reasons.append(f"{label.split(',')[0]} {statistic} {shown} > {lim}")
    reasons += _precision(inf, max(below, inf), n, dtype, what)
    return CheckResult(
        rule="max_kappa",
        metric=f"embedding.{key}",
        label=label,
        statistic=statistic,
        value=value,
        limit=limit,
        passed=not reasons,
        reason="; ".join(reasons) or None,
        source=source,
        floor=statistic_is_floor(agg, statistic),
        rel_uncertainty=rel_uncertainty(agg, statistic),
    )


@dataclass(frozen=True)
class _LayerValue:
    index: int
    name: str
    value: float
    inf: int
    below: int
    # the statistic itself is only a floor (the report's "floor" marks, docs/math.md#spectra)
    floor: bool = False
    rel: float | None = None  # its relative uncertainty from the capture's rounding, where the report has it


def statistic_is_floor(agg: Mapping[str, Any], statistic: Statistic) -> bool:
    """Whether the report marks ``statistic`` of this aggregate as only a floor (``"floor": {median: …}``;
    absent in older reports and for quantities that are never floors)."""
    marks = agg.get("floor")
    return isinstance(marks, Mapping) and marks.get(statistic) is True


def _layer_values(report: Mapping[str, Any], metric: MetricDef, statistic: Statistic) -> list[_LayerValue]:
    """The metric in every analysed layer that has it (a metric of P is absent where P is not observed)."""
    key, flag = metric.key, metric.flag
    out = []
    for position, layer in enumerate(report_layers(report)):
        path = f"layers[{position}]"
        if not isinstance(layer, Mapping):
            raise UsageError(f"{path} is not an object", "rerun condcli")
        if metric.needs_probs and layer.get(key) is None:
            continue
        agg = section(layer, key, path)
        below = layer.get("below_precision") or {}
        out.append(
            _LayerValue(
                index=int(layer["index"]),
                name=str(layer["name"]),
                value=statistic_of(agg, statistic, f"{path}.{key}"),
                inf=count(agg.get("inf_count", 0), f"{path}.{key}.inf_count"),
                below=0 if flag is None else count(below.get(flag) or 0, f"{path}.below_precision.{flag}"),
                floor=statistic_is_floor(agg, statistic),
                rel=rel_uncertainty(agg, statistic),
            )
        )
    return out


def layer_rule(
    report: Mapping[str, Any], rule: str, limit: float, statistic: Statistic, source: str
) -> CheckResult:
    """A per-layer rule (:data:`LAYER_RULES`): the worst analysed layer of the plain forward."""
    metric = LAYER_RULES[rule]
    values = _layer_values(report, metric, statistic)
    if not values and report_layers(report) and metric.needs_probs:
        others = ", ".join(f"`{r}`" for r, m in LAYER_RULES.items() if not m.needs_probs)
        raise UsageError(
            f"`{rule}` needs the attention probabilities P, which cannot be observed in any analysed layer "
            "of this model",
            f"gate it on what it does report, e.g. {others}",
        )
    if not values:
        raise UsageError(
            f"`{rule}` needs layers, but none were analysed", "drop `layers=none` or pick layers"
        )
    n = count(section(report, "inputs").get("count", 0), "inputs.count")
    dtype = str(section(report, "embedding").get("capture_dtype", "the capture dtype"))
    worst_value = metric.worst([v.value for v in values])
    worst = next(v for v in values if v.value == worst_value)
    over = [v for v in values if metric.beyond(v.value, limit)]
    reasons = []
    if over:
        shown, lim = fmt_pair(worst.value, limit)
        shown = ("≥ " if worst.floor else "") + shown + ("" if worst.floor else uncertainty_note(worst.rel))
        sign = ">" if metric.bound == "max" else "<"
        reasons.append(
            f"{metric.label} {statistic} {shown} {sign} {lim} in {len(over)} of {len(values)} layers, "
            f"worst layer {worst.index} {worst.name}"
        )
    what = FLAG_SUBJECT.get(metric.flag or "", metric.label)
    for v in values:
        reasons += _precision(v.inf, max(v.below, v.inf), n, dtype, what, f"layer {v.index} {v.name}")
    return CheckResult(
        rule=rule,
        metric=f"layers[{worst.index}].{metric.key}",
        label=f"{metric.label}, worst of {len(values)} layers",
        statistic=statistic,
        value=worst.value,
        limit=limit,
        passed=not reasons,
        reason="; ".join(reasons) or None,
        source=source,
        layer=worst.index,
        layer_name=worst.name,
        floor=worst.floor,
        rel_uncertainty=worst.rel,
    )


def evaluate(report: Mapping[str, Any], config: CheckConfig, kappa_key: str | None) -> list[CheckResult]:
    """Every threshold rule of ``config``, in the order of :data:`LIMITS`."""
    out = []
    for rule, limit in sorted(config.limits.items(), key=lambda kv: list(LIMITS).index(kv[0])):
        source = config.sources.get(rule, "")
        if rule == "max_kappa":
            if kappa_key is None:
                raise UsageError(
                    "`max_kappa`: `lam` differs from the λ this model adds at X itself",
                    "drop `lam`, so that κ of what its blocks see is measured",
                )
            out.append(kappa_rule(report, limit, config.statistic, kappa_key, source))
        else:
            out.append(layer_rule(report, rule, limit, config.statistic, source))
    return out
