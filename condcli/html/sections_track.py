"""Sections of a ``track`` report's page: κ(X) and, per layer, κ(X_l), μ(LA) and H(P) against the training
step, charts and sortable tables read from ``track.checkpoints[i].report`` (condcli.reports.track)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from condcli.figures import track as described
from condcli.figures.labels import html_text
from condcli.figures.track import LAYER_METRICS
from condcli.html.described import chart
from condcli.html.glossary import glossary_section
from condcli.html.section import (
    Report,
    Section,
    as_map,
    guarded,
    lam_text,
    missing,
    notes_section,
)
from condcli.html.tables import Cell, agg_cell, table
from condcli.reports.metrics import EMBEDDING, forward


def _points(report: Report) -> list[Mapping[str, Any]]:
    return described.checkpoints(report)


def _steps(points: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float(p["step"]) for p in points]


def _embedding(p: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(as_map(p.get("report")).get("embedding"))


_layers = described.layers_of
_indices = described.indices


def _embedding_html(report: Report) -> str:
    points = _points(report)
    if not points:
        return missing("checkpoints")
    lam = lam_text(report)
    kx = next(m for m in EMBEDDING if m.key == "kappa").label
    figure = described.track(report)
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
    return chart(figure.panel(0), "track-kappa-x") + table(
        cols, rows, "one row per checkpoint", "track-embedding"
    )


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
    steps = _steps(points)
    charts = "".join(
        chart(described.layer_panel(points, steps, key, log), f"track-{key}") for key, log in LAYER_METRICS
    )
    tables = "".join(
        f"<h3>{html_text(forward(key).label)}</h3>{_layer_table(points, key)}" for key, _ in LAYER_METRICS
    )
    return f'<div class="pair">{charts}</div>{tables}'


def sections(report: Report) -> list[Section]:
    """The page of a ``track`` report: κ(X), the layers, the notes and the glossary."""
    out = [
        guarded("track-embedding", "κ(X) against the training step", lambda: _embedding_html(report)),
        guarded("track-layers", "Layers against the training step", lambda: _layers_html(report)),
    ]
    out += notes_section(report)
    metrics = [m for m in EMBEDDING if m.key in ("kappa", "kappa_conditioned")]
    metrics += [forward(key) for key, _ in LAYER_METRICS]
    glossary = glossary_section(report, metrics)
    if glossary is not None:
        out.append(glossary)
    return out
