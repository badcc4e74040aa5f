"""Sections of a ``track`` report's page: κ(X) and, per layer, κ(X_l), μ(LA) and H(P) against the training
step, charts and sortable tables read from ``track.checkpoints[i].report`` (condcli.track_report)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from condcli.html.glossary import glossary_section
from condcli.html.section import Report, Section, as_map, as_maps, guarded, lam_text, missing, notes_html
from condcli.html.svg import CONDITIONED, PLAIN, VIRIDIS, Chart, Series, color_at, line_chart
from condcli.html.tables import Cell, agg_cell, table
from condcli.metrics import EMBEDDING, forward

LAYER_METRICS = (("kappa", True), ("mu_la", True), ("attention_entropy", False))  # (key, log y)


def _points(report: Report) -> list[Mapping[str, Any]]:
    return as_maps(as_map(report.get("track")).get("checkpoints"))


def _steps(points: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float(p["step"]) for p in points]


def _median(agg: object) -> float:
    value = as_map(agg).get("median")
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _embedding(p: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(p.get("report")).get("embedding"))


def _layers(p: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    return {int(layer["index"]): layer for layer in as_maps(as_map(p.get("report")).get("layers"))}


def _indices(points: Sequence[Mapping[str, Any]]) -> list[int]:
    return sorted({i for p in points for i in _layers(p)})


def _embedding_html(report: Report) -> str:
    points = _points(report)
    if not points:
        return missing("checkpoints")
    steps = _steps(points)
    lam = lam_text(report)
    kx = next(m for m in EMBEDDING if m.key == "kappa").label
    chart = Chart(
        title=f"{kx} and κ(X + {lam}·I_k) against the training step (medians over samples)",
        xlabel="training step",
        ylabel="median κ",
        series=[
            Series(kx, steps, [_median(_embedding(p).get("kappa")) for p in points], PLAIN, markers=True),
            Series(
                f"κ(X + {lam}·I_k)",
                steps,
                [_median(_embedding(p).get("kappa_conditioned")) for p in points],
                CONDITIONED,
                markers=True,
            ),
        ],
    )
    rows: list[list[Cell | str]] = []
    for p in points:
        e = _embedding(p)
        below = e.get("below_precision") if isinstance(e.get("below_precision"), int) else 0
        rows.append(
            [
                Cell(str(p["step"]), float(p["step"])),
                agg_cell(e.get("kappa"), "median", below),
                agg_cell(e.get("kappa"), "min"),
                agg_cell(e.get("kappa"), "max"),
                agg_cell(e.get("kappa_conditioned")),
                str(p.get("path", "")),
                str(p.get("step_from", "")),
            ]
        )
    cols = ["step", f"{kx} median", "min", "max", f"κ(X + {lam}·I_k) median", "checkpoint", "step from"]
    return line_chart(chart, "track-kappa-x") + table(cols, rows, "one row per checkpoint", "track-embedding")


def _layer_chart(points: Sequence[Mapping[str, Any]], key: str, log: bool) -> str:
    steps = _steps(points)
    indices = _indices(points)
    label = forward(key).label
    series = []
    for n, i in enumerate(indices):
        values = [_median(_layers(p).get(i, {}).get(key)) for p in points]
        if all(math.isnan(v) for v in values):
            continue
        color = color_at(VIRIDIS, n / max(len(indices) - 1, 1))
        series.append(Series(f"layer {i}", steps, values, color, markers=True, width=1.4))
    if not series:
        return missing(f"{label} (not observable for this model)")
    chart = Chart(
        title=f"{label} per layer against the training step (medians over samples)",
        xlabel="training step",
        ylabel=f"median {label}",
        series=series,
        log_y=log,
        y_range=None if log else (0.0, 1.0),
        legend=len(series) <= 12,
    )
    return line_chart(chart, f"track-{key}")


def _layer_table(points: Sequence[Mapping[str, Any]], key: str) -> str:
    metric = forward(key)
    indices = _indices(points)
    rows: list[list[Cell | str]] = []
    for p in points:
        layers = _layers(p)
        row: list[Cell | str] = [Cell(str(p["step"]), float(p["step"]))]
        for i in indices:
            layer = layers.get(i, {})
            below = as_map(layer.get("below_precision")).get(metric.flag) if metric.flag else 0
            row.append(agg_cell(layer.get(key), "median", below if isinstance(below, int) else 0))
        rows.append(row)
    caption = f"{metric.label}: one row per checkpoint, one column per layer [index] (medians over samples)"
    return table(["step", *(f"[{i}]" for i in indices)], rows, caption, f"track-table-{key}")


def _layers_html(report: Report) -> str:
    points = _points(report)
    if not _indices(points):
        return missing("layers (none were chosen)")
    charts = "".join(_layer_chart(points, key, log) for key, log in LAYER_METRICS)
    tables = "".join(
        f"<h3>{escape(forward(key).label)}</h3>{_layer_table(points, key)}" for key, _ in LAYER_METRICS
    )
    return f'<div class="pair">{charts}</div>{tables}'


def sections(report: Report) -> list[Section]:
    """The page of a ``track`` report: κ(X), the layers, the notes and the glossary."""
    out = [
        guarded("track-embedding", "κ(X) against the training step", lambda: _embedding_html(report)),
        guarded("track-layers", "Layers against the training step", lambda: _layers_html(report)),
    ]
    notes = notes_html(report)
    if notes:
        out.append(Section("notes", "Notes", notes))
    metrics = [m for m in EMBEDDING if m.key in ("kappa", "kappa_conditioned")]
    metrics += [forward(key) for key, _ in LAYER_METRICS]
    glossary = glossary_section(report, metrics)
    if glossary is not None:
        out.append(glossary)
    return out
