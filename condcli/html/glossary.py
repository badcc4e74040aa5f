"""The glossary, generated from the metric registry (:mod:`condcli.reports.metrics`): label, formula and
which way
is worse, only for the metrics the report holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from condcli.figures.labels import html_text
from condcli.html.section import Report, Section
from condcli.reports.metrics import ALL, MetricDef


def _layers(report: Report) -> list[Mapping[str, Any]]:
    layers = report.get("layers")
    return [layer for layer in layers if isinstance(layer, Mapping)] if isinstance(layers, list) else []


def present(report: Report) -> list[MetricDef]:
    """The registry's metrics this report holds a value for (embedding.<key>, layers[i].<key>), less a
    shadow metric that equals its metric wherever it is given."""
    emb = report.get("embedding")
    emb = emb if isinstance(emb, Mapping) else {}
    layers = _layers(report)
    found = []
    for m in ALL:
        if m.scope == "embedding":
            has = emb.get(m.key) is not None
        elif m.scope == "table":
            table = report.get("embedding_table")
            has = isinstance(table, Mapping) and table.get(m.key) is not None
        else:
            has = any(layer.get(m.key) is not None for layer in layers)
        if has and not _shadowed(m, emb, layers):
            found.append(m)
    return found


def _value(v: Any) -> Any:
    return v.get("median") if isinstance(v, Mapping) else v


def _shadowed(m: MetricDef, emb: Mapping[str, Any], layers: list[Mapping[str, Any]]) -> bool:
    """A shadow metric (κ_distinct) that equals its metric everywhere (a ViT: no repeated rows), as the
    tables do not show it either."""
    if m.shadow_of is None:
        return False
    holders = [emb] if m.scope == "embedding" else layers
    return all(
        _value(h.get(m.key)) == _value(h.get(m.shadow_of)) for h in holders if h.get(m.key) is not None
    )


def glossary_html(metrics: list[MetricDef]) -> str:
    """A definition list: label, formula, and which way is worse."""
    items = "".join(
        f"<dt>{html_text(m.label)}</dt><dd>{html_text(m.formula)}. "
        f"{'Higher is worse' if m.worse == 'higher' else 'Lower is worse'}.</dd>"
        for m in metrics
    )
    return f'<dl class="glossary">{items}</dl>'


def glossary_section(report: Report, extra: list[MetricDef] | None = None) -> Section | None:
    """The glossary section, or None where the report holds none of the registry's metrics."""
    metrics = present(report)
    metrics += [m for m in extra or [] if m not in metrics]
    if not metrics:
        return None
    return Section("glossary", "Glossary", glossary_html(metrics))
