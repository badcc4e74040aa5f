"""The sections of a ``sweep-lambda`` report: κ(X + λ·I_k) against λ with its p10–p90 band, the Weyl bound,
κ(X), κ(X + C), the target and the recommended λ (as :mod:`condcli.plots.sweep` draws them), the per-layer
sweep where the report has one, and the table of the grid."""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.html.numbers import floats, full, num, to_float
from condcli.html.section import Report, Section, as_map, as_maps, guarded, missing, notes_html
from condcli.html.svg import CONDITIONED, PLAIN, VIRIDIS, Chart, RefLine, Series, color_at, line_chart
from condcli.html.tables import Cell, number, table
from condcli.metrics import EMBEDDING

LABELS = {m.key: m.label for m in EMBEDDING}  # the registry's labels, as plots.sweep's legend

WEYL = "Weyl bound (σ_1+λ)/(λ−σ_1)"


def _log_x(lambdas: list[float]) -> bool:
    """Log x when every λ is positive and they span two decades or more (as plots.sweep)."""
    ok = [v for v in lambdas if math.isfinite(v)]
    return bool(ok) and min(ok) > 0 and max(ok) / min(ok) >= 100


def _finite_only(values: list[float]) -> list[float]:
    """A bound's "inf" means no bound at that λ: not drawn (NaN)."""
    return [v if math.isfinite(v) else math.nan for v in values]


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
                f"<span>{escape(label)}</span></div>"
            )
    text = sweep.get("recommendation")
    rec = f'<p class="lead">recommended: {escape(text)}</p>' if isinstance(text, str) else ""
    return (f'<div class="headline">{"".join(boxes)}</div>' if boxes else "") + rec


def sweep_chart(sweep: Mapping[str, Any]) -> str:
    """κ(X + λ·I_k) median with the p10–p90 band, the Weyl bound, the references and the recommended λ."""
    lambdas = floats(sweep.get("lambdas"))
    kappa = as_map(sweep.get("kappa"))
    median = floats(kappa.get("median"))
    if not lambdas or len(median) != len(lambdas):
        return missing("the κ of the λ grid")
    p10, p90 = floats(kappa.get("p10")), floats(kappa.get("p90"))
    band = (p10, p90) if len(p10) == len(p90) == len(lambdas) else None
    series = [
        Series(
            f"{LABELS['kappa_conditioned']}, median",
            lambdas,
            median,
            CONDITIONED,
            band=band,
            markers=True,
            band_name="p10–p90",
        )
    ]
    weyl = floats(sweep.get("weyl_bound"))
    if len(weyl) == len(lambdas):
        series.append(Series(WEYL, lambdas, _finite_only(weyl), "#000000", dash="6 4"))
    refs = []
    for key, color, dash, name in (
        ("kappa_plain", PLAIN, "", LABELS["kappa"]),
        ("kappa_corrected", "#1f77b4", "8 3 2 3", LABELS["kappa_corrected"]),
        ("target_kappa", "#7f7f7f", "2 3", "target κ"),
    ):
        v = to_float(sweep.get(key))
        if v is not None and not math.isnan(v):
            refs.append(RefLine(v, f"{name} = {num(v)}", color, "y", dash or "none"))
    rec = to_float(sweep.get("recommended_lambda"))
    if rec is not None:
        refs.append(RefLine(rec, f"recommended λ = {num(rec)}", "#800080", "x", "2 3", label=True))
    chart = Chart("Condition number of X + λ·I_k", "λ", "κ", series, log_x=_log_x(lambdas), refs=refs)
    return line_chart(chart, "chart-sweep")


def layers_chart(sweep: Mapping[str, Any]) -> str:
    """One median κ(X_l) curve per layer against λ, coloured by depth (viridis); "" without layers."""
    lambdas = floats(sweep.get("lambdas"))
    layers = as_maps(sweep.get("layers"))
    if not layers:
        return ""
    idx = [to_float(layer.get("index")) or 0.0 for layer in layers]
    lo, hi = min(idx), max(max(idx), min(idx) + 1)
    series = [
        Series(
            f"layer {int(i)} ({layer.get('name', '')})",
            lambdas,
            floats(layer.get("kappa_median")),
            color_at(VIRIDIS, (i - lo) / (hi - lo)),
            markers=True,
            width=1.4,
        )
        for i, layer in zip(idx, layers, strict=True)
    ]
    if not series:
        return ""
    chart = Chart("Conditioned forward: κ per layer", "λ", "median κ(X_l)", series, log_x=_log_x(lambdas))
    return line_chart(chart, "chart-sweep-layers")


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
        + f'<p class="footnote">{escape(note)}</p>'
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
            lambda: headline(sweep) + f'<div class="pair">{sweep_chart(sweep)}{layers_chart(sweep)}</div>',
        ),
        guarded("sweep-table", "The λ grid", lambda: grid_table(sweep)),
    ]
    if as_maps(sweep.get("layers")):
        out.append(guarded("sweep-layers", "Per-layer κ over λ", lambda: layers_table(sweep)))
    notes = notes_html(report)
    if notes:
        out.append(Section("notes", "Notes", notes))
    return out
