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
from condcli.gate.metrics import Statistic, count, number, report_layers, section, statistic_of
from condcli.gate.report import CheckResult, fmt_pair, uncertainty_note
from condcli.numbers import rel_uncertainty
from condcli.reports.metrics import FLAG_SUBJECT, GATES, MetricDef

# rule → its per-layer metric (the registry's gates on the forward); the others are on X
LAYER_RULES: dict[str, MetricDef] = {rule: m for rule, m in GATES.items() if m.scope == "forward"}
EMBEDDING_RULES: dict[str, MetricDef] = {rule: m for rule, m in GATES.items() if m.scope == "embedding"}
TABLE_RULES: dict[str, MetricDef] = {rule: m for rule, m in GATES.items() if m.scope == "table"}


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


def _precision(
    inf: int, below: int, n: int, dtype: str, what: str, where: str = "", repeated: tuple[int, str] = (0, "")
) -> list[str]:
    """The docs/math.md#spectra reasons: samples with exactly repeated rows (``repeated``: how many, and the
    reason, e.g. "26 distinct of 28 rows: repeated tokens"), other singular samples, and samples whose κ is
    only a floor."""
    out = []
    at = f" in {where}" if where else ""
    rows, why = repeated
    if rows:
        out.append(f"{what} is singular (κ = inf exactly){at} in {rows} of {n} samples: {why}")
    if inf > rows:
        out.append(f"{what} is numerically singular (κ = inf){at} in {inf - rows} of {n} samples")
    if below > inf:
        out.append(
            f"{what} is below {dtype} resolution{at} in {below - inf} of {n} samples "
            "(its κ is a floor, not a measurement)"
        )
    if (below > inf or inf > rows) and dtype != "float64":
        out[-1] += " — rerun with `dtype=float64`"
    return out


def _gate_of(key: str, scope: str) -> str:
    """The gate rule of the registry metric ``key`` in ``scope``."""
    return next(r for r, m in GATES.items() if m.key == key and m.scope == scope)


def _label(report: Mapping[str, Any], key: str) -> str:
    if key == "kappa":
        return "κ(X)"
    if key == "kappa_distinct":
        return EMBEDDING_RULES["max_kappa_distinct"].label
    if key == "kappa_corrected":
        return "κ(X + C), the model's own correction"
    lam = section(report, "settings").get("lambda")
    return f"κ(X + {lam:g}·I_k), the model's own shift"


def _rows_reason(emb: Mapping[str, Any]) -> str:
    why = emb.get("repeated_rows_reason")
    return why if isinstance(why, str) else "repeated rows"


def kappa_rule(
    report: Mapping[str, Any],
    limit: float,
    statistic: Statistic,
    key: str,
    source: str,
    rule: str = "max_kappa",
) -> CheckResult:
    """A rule on the embedding section: ``max_kappa`` (``key``: see :func:`seen_key`), or another of
    :data:`EMBEDDING_RULES` on its own key (``max_kappa_distinct``)."""
    emb = section(report, "embedding")
    agg = section(emb, key, "embedding")
    value = statistic_of(agg, statistic, f"embedding.{key}")
    n = count(section(report, "inputs").get("count", 0), "inputs.count")
    inf = count(agg.get("inf_count", 0), f"embedding.{key}.inf_count")
    metric = next((m for m in EMBEDDING_RULES.values() if m.key == key), None)
    # samples below precision are flagged for X and its distinct rows; X + λI_k / X + C by inf alone
    flag = None if metric is None else metric.flag
    below = inf if flag is None else count(emb.get(flag, 0), f"embedding.{flag}")
    repeated = 0
    if metric is not None and metric.rows_of is not None:
        repeated = count(emb.get("repeated_rows", 0), "embedding.repeated_rows")
    dtype = str(emb.get("resolution_dtype") or emb.get("capture_dtype", "the capture dtype"))
    what = {"kappa": "X", "kappa_distinct": "the distinct rows of X"}.get(key, "the conditioned X")
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
    reasons += _precision(inf, max(below, inf), n, dtype, what, repeated=(repeated, _rows_reason(emb)))
    if repeated and metric is not None and metric.distinct is not None:
        reasons[-1] += (
            f" — gate `{_gate_of(metric.distinct, 'embedding')}` (κ over the distinct rows) instead"
        )
    return CheckResult(
        rule=rule,
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


def table_rule(report: Mapping[str, Any], rule: str, limit: float, source: str) -> CheckResult:
    """A rule on the token-embedding table E (:data:`TABLE_RULES`): a model constant, no statistic."""
    metric = TABLE_RULES[rule]
    table = report.get("embedding_table")
    if not isinstance(table, Mapping):
        raise UsageError(
            f"`{rule}` gates the token-embedding table E, and this report has none (the model has no "
            "vocabulary table, or the report predates it)",
            f"drop `{rule}`",
        )
    value = number(table.get(metric.key), f"embedding_table.{metric.key}")
    reasons = []
    if metric.beyond(value, limit):
        shown, lim = fmt_pair(value, limit)
        reasons.append(f"{metric.label} {shown} > {lim}")
    if math.isinf(value):
        reasons.append("E is singular at float64 resolution (κ = inf)")
    return CheckResult(
        rule=rule,
        metric=f"embedding_table.{metric.key}",
        label=metric.label,
        statistic="value",
        value=value,
        limit=limit,
        passed=not reasons,
        reason="; ".join(reasons) or None,
        source=source,
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
    repeated: int = 0  # samples whose matrix repeats rows exactly (κ = inf, not a floor)


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
        rows = layer.get("repeated_rows") or {}
        if not isinstance(rows, Mapping):
            raise UsageError(f"{path}.repeated_rows is not an object", "rerun condcli")
        out.append(
            _LayerValue(
                index=int(layer["index"]),
                name=str(layer["name"]),
                value=statistic_of(agg, statistic, f"{path}.{key}"),
                inf=count(agg.get("inf_count", 0), f"{path}.{key}.inf_count"),
                below=0 if flag is None else count(below.get(flag) or 0, f"{path}.below_precision.{flag}"),
                floor=statistic_is_floor(agg, statistic),
                rel=rel_uncertainty(agg, statistic),
                repeated=0
                if metric.rows_of is None
                else count(rows.get(metric.rows_of) or 0, f"{path}.repeated_rows.{metric.rows_of}"),
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
    rows_why = "repeated tokens; X carries no positions" if metric.rows_of == "x" else "repeated rows"
    for v in values:
        at = f"layer {v.index} {v.name}"
        reasons += _precision(v.inf, max(v.below, v.inf), n, dtype, what, at, (v.repeated, rows_why))
    if any(v.repeated for v in values) and metric.distinct is not None:
        reasons[-1] += f" — gate `{_gate_of(metric.distinct, 'forward')}` (κ over the distinct rows) instead"
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
        elif rule in TABLE_RULES:
            out.append(table_rule(report, rule, limit, source))
        elif rule in EMBEDDING_RULES:
            key = EMBEDDING_RULES[rule].key
            out.append(kappa_rule(report, limit, config.statistic, key, source, rule))
        else:
            out.append(layer_rule(report, rule, limit, config.statistic, source))
    return out
