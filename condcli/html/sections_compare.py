"""The sections of a ``compare`` report: two models side by side, X's and every layer's metrics with their
B/A ratios, and which way each moved (the metric registry's direction).

Everything is read from the report's JSON (``metrics``, ``a``, ``b``), so a saved report renders as it was
made; a part an older report lacks becomes a note (:func:`guarded`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.html.numbers import num, to_float
from condcli.html.section import Report, Section, guarded, missing
from condcli.html.sections_check import layer_text, warnings_html
from condcli.html.svg import Chart, RefLine, Series, line_chart
from condcli.html.tables import Cell, number, table
from condcli.reports.metrics import ALL

A_COLOR, B_COLOR = "#1f77b4", "#ff7f0e"  # blue A (the reference), orange B
RATIO_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
CONDITIONED = "conditioned."
GROUPS = (  # (within-layer prefix, title, which metrics): the parts of a layer's rows
    ("", "plain forward", "forward"),
    ("", "projection weights (model constants)", "weight"),
    (CONDITIONED, "conditioned forward (X + λ·I_k fed on)", "forward"),
)


def _rows(report: Report) -> list[Mapping[str, Any]]:
    rows = report["metrics"]
    if not isinstance(rows, list):
        raise TypeError("metrics is not a list")
    return [r for r in rows if isinstance(r, Mapping) and isinstance(r.get("metric"), str)]


def worse_direction(key: str) -> str | None:
    """'higher' or 'lower': which way the metric at ``key`` (``embedding.kappa``, ``layers[3].mu_la``,
    ``layers[3].conditioned.mu_la``, ``embedding.seen``) is worse; None when the registry does not know it."""
    scope, _, rest = key.partition(".")
    if key == "embedding.seen":
        return "higher"
    rest = rest.removeprefix(CONDITIONED)
    want = ("embedding",) if scope == "embedding" else ("forward", "weight")
    return next((m.worse for m in ALL if m.key == rest and m.scope in want), None)


def _trend(key: str, ratio: float | None) -> Cell:
    """Whether B is better or worse than A on this metric (within 1 %: about the same)."""
    worse = worse_direction(key)
    if ratio is None or worse is None or math.isnan(ratio):
        return Cell("—")
    if abs(ratio - 1) <= 0.01:
        return Cell("≈ same", ratio)
    better = ratio < 1 if worse == "higher" else ratio > 1
    arrow = "↓" if ratio < 1 else "↑"
    return Cell(f"{arrow} B {'better' if better else 'worse'}", ratio, title=f"{worse} is worse")


def _side_value(row: Mapping[str, Any], side: str) -> Cell:
    v = to_float(row.get(side))
    floor = row.get("floor")
    if isinstance(floor, Mapping) and floor.get(side) is True and v is not None:
        return Cell(f"≥ {num(v)} ⚠", v, ("floor",))
    return number(v)


def _model_pairs(side: Mapping[str, Any]) -> dict[str, str]:
    def get(section: str, key: str) -> Any:
        part = side.get(section)
        return part.get(key) if isinstance(part, Mapping) else None

    lam = to_float(get("settings", "lambda"))
    return {
        "model": str(get("model", "spec")),
        "family": str(get("model", "family")),
        "weights": f"{get('model', 'weights')} ({get('model', 'source')})",
        "layers": str(get("model", "num_layers")),
        "inputs": str(get("inputs", "description") or get("inputs", "kind")),
        "tokens × dim": f"{get('inputs', 'tokens')} × {get('inputs', 'dim')}",
        "X taken at": str(get("embedding", "where")),
        "λ": "—" if lam is None else f"{lam:g}",
        "dtype, device": f"{get('settings', 'dtype')}, {get('settings', 'device')}",
    }


def models_html(report: Report) -> str:
    """A and B side by side: what each model is, what it saw, how it was run; then the warnings."""
    a, b = report["a"], report["b"]
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        raise TypeError("a and b are not reports")
    left, right = _model_pairs(a), _model_pairs(b)
    rows: list[list[Cell | str]] = [[k, left[k], right[k]] for k in left]
    stat = report.get("statistic")
    intro = (
        f"<p>The same analysis of two models: A is the reference, ratios are B/A, each number the "
        f"{escape(str(stat))} over samples.</p>"
    )
    return intro + table(["", "A", "B"], rows, table_id="compare-models-table") + warnings_html(report)


def x_html(report: Report) -> str:
    """X's condition numbers of A and B and their ratio."""
    rows: list[list[Cell | str]] = []
    for r in _rows(report):
        if r.get("layer") is not None:
            continue
        ratio = to_float(r.get("ratio"))
        rows.append(
            [
                str(r.get("label")),
                _side_value(r, "a"),
                _side_value(r, "b"),
                number(ratio),
                _trend(str(r["metric"]), ratio),
            ]
        )
    if not rows:
        return missing("X's metrics")
    return table(["metric", "A", "B", "B/A", "B vs A"], rows, table_id="compare-x-table")


def _layer_rows(report: Report, prefix: str, scope: str) -> list[Mapping[str, Any]]:
    keys = {m.key for m in ALL if m.scope == scope}
    out = []
    for r in _rows(report):
        if not isinstance(r.get("layer"), Mapping):
            continue
        within = _within(r)
        if prefix and not within.startswith(prefix):
            continue
        if not prefix and within.startswith(CONDITIONED):
            continue
        if within.removeprefix(prefix) in keys:
            out.append(r)
    return out


def _label(r: Mapping[str, Any]) -> str:
    return str(r.get("label", "")).removesuffix(", conditioned")


def _index(r: Mapping[str, Any]) -> float:
    layer = r.get("layer")
    index = to_float(layer.get("index")) if isinstance(layer, Mapping) else None
    return math.nan if index is None else index


def _charts(report: Report) -> str:
    """κ(X_l) and μ(LA) of A and B per layer (the conditioned forward dashed), and every per-layer
    metric's B/A on one log axis (1: the same)."""
    out = []
    for key, label in (("kappa", "κ(X_l)"), ("mu_la", "μ(LA)")):
        series = []
        for prefix, dash, group, what in (
            ("", "", "plain", ""),
            (CONDITIONED, "6 4", "conditioned", ", conditioned"),
        ):
            rows = [r for r in _layer_rows(report, prefix, "forward") if _within(r) == prefix + key]
            if not rows:
                continue
            xs = [_index(r) for r in rows]
            for side, color in (("a", A_COLOR), ("b", B_COLOR)):
                ys = [to_float(r.get(side)) for r in rows]
                series.append(
                    Series(
                        f"{side.upper()}{what}",
                        xs,
                        [math.nan if y is None else y for y in ys],
                        color,
                        dash=dash,
                        markers=True,
                        group=group if prefix else "",
                    )
                )
        if series:
            chart = Chart(f"{label} per layer: A and B", "layer", label, series)
            out.append(line_chart(chart, f"compare-chart-{key}"))
    ratios = []
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for r in _layer_rows(report, "", "forward"):
        by_label.setdefault(_label(r), []).append(r)
    for i, (label, rows) in enumerate(by_label.items()):
        xs = [_index(r) for r in rows]
        ys = [to_float(r.get("ratio")) for r in rows]
        ratios.append(
            Series(
                label,
                xs,
                [math.nan if y is None else y for y in ys],
                RATIO_COLORS[i % len(RATIO_COLORS)],
                markers=True,
            )
        )
    if ratios:
        chart = Chart(
            "B/A per layer, plain forward (below 1: B lower)",
            "layer",
            "B/A",
            ratios,
            refs=[RefLine(1.0, "B = A", "#555555")],
        )
        out.append(line_chart(chart, "compare-chart-ratios"))
    return f'<div class="pair">{"".join(out)}</div>' if out else ""


def _within(r: Mapping[str, Any]) -> str:
    key = str(r["metric"])
    return key.split(".", 1)[1] if "." in key else ""


def layers_html(report: Report) -> str:
    """Per-layer charts, then one sortable table per part (plain forward, weights, conditioned forward):
    layer, metric, A, B, B/A."""
    parts = [_charts(report)]
    for prefix, title, scope in GROUPS:
        rows = _layer_rows(report, prefix, scope)
        if not rows:
            continue
        cells: list[list[Cell | str]] = []
        for r in rows:
            ratio = to_float(r.get("ratio"))
            cells.append(
                [
                    layer_text(r.get("layer")),
                    _label(r),
                    _side_value(r, "a"),
                    _side_value(r, "b"),
                    number(ratio),
                    _trend(str(r["metric"]), ratio),
                ]
            )
        parts.append(
            table(
                ["layer", "metric", "A", "B", "B/A", "B vs A"],
                cells,
                caption=f"layers, {title}",
                table_id=f"compare-layers-{scope}{'-conditioned' if prefix else ''}",
            )
        )
    if len(parts) == 1 and not parts[0]:
        return missing("per-layer metrics")
    return "".join(parts)


def compare_sections(report: Report) -> list[Section]:
    """A and B: the models, X's metrics, every layer's, with B/A ratios."""
    return [
        guarded("compare-models", "A and B", lambda: models_html(report)),
        guarded("compare-x", "X: A and B", lambda: x_html(report)),
        guarded("compare-layers", "Layers: A and B", lambda: layers_html(report)),
    ]


def sections(report: Report) -> list[Section]:
    """The sections of a ``compare`` report."""
    return compare_sections(report)
