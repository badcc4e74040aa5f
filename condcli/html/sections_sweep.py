"""The sections of a ``sweep-lambda`` report: κ(X + λ·I_k) against λ with its p10–p90 band, the Weyl bound,
κ(X), κ(X + C), the target and the recommended λ (described in :mod:`condcli.figures.sweep`, which the PNG
draws too), the per-layer sweep where the report has one, and the table of the grid."""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.figures.labels import html_text
from condcli.figures.sweep import sweep as described_sweep
from condcli.html.described import chart
from condcli.html.numbers import floats, full, num, to_float
from condcli.html.section import Report, Section, as_map, as_maps, guarded, missing, notes_section
from condcli.html.tables import Cell, number, table


def headline(sweep: Mapping[str, Any]) -> str:
    """The recommended λ, the target and the Weyl λ (κ(X) and κ(X + C) are in the page header)."""
    boxes = []
    for key, label in (
        ("recommended_lambda", "recommended λ"),
        ("target_kappa", "target κ"),
        ("weyl_lambda_for_target", "Weyl λ for the target"),
    ):
        v = to_float(sweep.get(key))
        if v is not None:
            boxes.append(
                f'<div data-value="{full(v)}" title="{full(v)}"><b>{escape(num(v))}</b>'
                f"<span>{html_text(label)}</span></div>"
            )
    text = sweep.get("recommendation")
    rec = f'<p class="lead">recommended: {html_text(text)}</p>' if isinstance(text, str) else ""
    return (f'<div class="headline">{"".join(boxes)}</div>' if boxes else "") + rec


def charts(report: Report) -> str:
    """κ(X + λ·I_k) median with the p10–p90 band, the Weyl bound, the references and the recommended λ; the
    per-layer sweep beside it where the report has one."""
    figure = described_sweep(report)
    out = chart(figure.panel(0), "chart-sweep")
    if len(figure.panels) > 1:
        out += chart(figure.panel(1), "chart-sweep-layers")
    return out


def layers_table(sweep: Mapping[str, Any]) -> str:
    """Per layer: median κ(X_l) of the plain forward, then at each λ."""
    lambdas = floats(sweep.get("lambdas"))
    layers = as_maps(sweep.get("layers"))
    rows: list[list[Cell | str]] = []
    for layer in layers:
        values = floats(layer.get("kappa_median"))
        row: list[Cell | str] = [
            number(to_float(layer.get("index")), 6),
            str(layer.get("name", "")),
            number(to_float(layer.get("kappa_plain_median"))),
        ]
        rows.append(row + [number(v) for v in values])
    header = ["layer", "name", "plain", *(f"λ = {num(v)}" for v in lambdas)]
    return table(
        header, rows, "median κ(X_l): plain forward, then with X + λ·I_k fed on", "table-sweep-layers"
    )


def grid_table(sweep: Mapping[str, Any]) -> str:
    """λ × (κ median, p10, p90, Weyl bound, supplement estimate), the recommended λ marked."""
    lambdas = floats(sweep.get("lambdas"))
    kappa = as_map(sweep.get("kappa"))
    cols = {k: floats(kappa.get(k)) for k in ("median", "p10", "p90")}
    weyl, supp = floats(sweep.get("weyl_bound")), floats(sweep.get("supplement_estimate"))
    rec = to_float(sweep.get("recommended_lambda"))

    def at(values: list[float], i: int) -> Cell:
        return number(values[i]) if i < len(values) else Cell("—")

    rows: list[list[Cell | str]] = []
    for i, lam in enumerate(lambdas):
        bound = (
            Cell("none", math.inf, title="no bound: λ ≤ σ_1")
            if i < len(weyl) and math.isinf(weyl[i])
            else at(weyl, i)
        )
        rows.append(
            [
                number(lam, 6),
                at(cols["median"], i),
                at(cols["p10"], i),
                at(cols["p90"], i),
                bound,
                at(supp, i),
                "◀ recommended" if rec is not None and lam == rec else "",
            ]
        )
    header = ["λ", "κ median", "κ p10", "κ p90", "Weyl bound", "supplement est.", "note"]
    note = (
        "Weyl bound: the guaranteed (σ_1+λ)/(λ−σ_1), 'none' where λ ≤ σ_1; supplement est.: the paper's "
        "(σ_1+λ)/(λ−σ_k), an estimate, not a bound (medians over samples)."
    )
    return (
        table(header, rows, "κ(X + λ·I_k) over the grid", "table-sweep")
        + f'<p class="footnote">{html_text(note)}</p>'
    )


def sections(report: Report) -> list[Section]:
    """The sweep (headline, chart, table), the per-layer sweep where present, the notes."""
    sweep = as_map(report.get("sweep"))
    if not sweep:
        return [Section("sweep", "λ sweep", missing("the λ sweep"))]
    out = [
        guarded(
            "sweep",
            "κ(X + λ·I_k) over λ",
            lambda: headline(sweep) + f'<div class="pair">{charts(report)}</div>',
        ),
        guarded("sweep-table", "The λ grid", lambda: grid_table(sweep)),
    ]
    if as_maps(sweep.get("layers")):
        out.append(guarded("sweep-layers", "Per-layer κ over λ", lambda: layers_table(sweep)))
    out += notes_section(report)
    return out
