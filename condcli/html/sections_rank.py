"""The sections of a ``rank-decay`` report (Linformer, Figure 1): the normalized cumulative spectrum c_j of P,
one curve per layer coloured by depth with its p10–p90 band (as :mod:`condcli.plots.rank`), the layers ×
heads heatmap of c_m, the per-layer table (c_m, rank at 90 %, erank), and per layer its heads' curves and
table, picked by layer. With a conditioned forward each figure and table has its conditioned twin."""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.html.controls import picker
from condcli.html.heatmap import depth_color
from condcli.html.numbers import floats, full, num, stat, to_float
from condcli.html.section import (
    Report,
    Section,
    as_map,
    as_maps,
    conditioned_note,
    guarded,
    lam_text,
    missing,
    notes_html,
)
from condcli.html.svg import Chart, RefLine, Series, heatmap, line_chart
from condcli.html.tables import Cell, number, table

Y_LABEL = "c_j: share of Σσ in the j largest σ of P"


def panels(report: Report) -> list[tuple[Mapping[str, Any], str, str]]:
    """(rank_decay section, title, id suffix) for the plain forward and, where run, the conditioned one."""
    out = []
    plain = as_map(report.get("rank_decay"))
    if as_maps(plain.get("layers")):
        out.append((plain, "plain forward", "plain"))
    cond = as_map(report.get("rank_decay_conditioned"))
    if as_maps(cond.get("layers")):
        out.append((cond, f"conditioned forward (X + {lam_text(report)}·I_k)", "cond"))
    return out


def _m_label(section: Mapping[str, Any]) -> str:
    m = section.get("index_m")
    return f"m = {m}" if m is not None else "m = round(n/4) per layer"


def _c(v: float | None) -> Cell:
    """A cumulative share: three decimals (c lives in (0, 1])."""
    return Cell("—") if v is None or math.isnan(v) else Cell(f"{v:.3f}", v)


def _depth(report: Report) -> tuple[float, float]:
    idx = [
        to_float(layer.get("index")) or 0.0
        for s, _, _ in panels(report)
        for layer in as_maps(s.get("layers"))
    ]
    lo = min(idx, default=0.0)
    return lo, max(max(idx, default=1.0), lo + 1)


def _low(report: Report) -> float:
    """The y range's bottom shared by every panel: the lowest p10 less 0.05, not below 0 (as plots.rank)."""
    lows = [
        v
        for s, _, _ in panels(report)
        for layer in as_maps(s.get("layers"))
        for v in floats(as_map(layer.get("cumulative")).get("p10"))
        or floats(as_map(layer.get("cumulative")).get("median"))
        if math.isfinite(v)
    ]
    return max(0.0, min(lows, default=0.0) - 0.05)


def curves_chart(report: Report, section: Mapping[str, Any], title: str, chart_id: str) -> str:
    """c_j against j, one median curve per layer with its p10–p90 band, a dotted line at a common m."""
    lo, hi = _depth(report)
    series = []
    n_max = 1
    for layer in as_maps(section.get("layers")):
        band = as_map(layer.get("cumulative"))
        median = floats(band.get("median"))
        if not median:
            continue
        n_max = max(n_max, len(median))
        p10, p90 = floats(band.get("p10")), floats(band.get("p90"))
        index = to_float(layer.get("index")) or 0.0
        series.append(
            Series(
                f"layer {layer.get('index')}",
                [float(j) for j in range(1, len(median) + 1)],
                median,
                depth_color((index - lo) / (hi - lo)),
                band=(p10, p90) if len(p10) == len(p90) == len(median) else None,
                group=f"layer-{layer.get('index')}",
                width=1.3,
            )
        )
    if not series:
        return missing("the cumulative spectra")
    m = to_float(section.get("index_m"))
    refs = [RefLine(m, f"m = {num(m, 6)}", "#808080", "x", "2 3")] if m is not None else []
    log_x = n_max > 16
    chart = Chart(
        f"{title}: median over heads and samples, p10–p90",
        "singular value index j" + (" (log scale)" if log_x else ""),
        Y_LABEL,
        series,
        log_y=False,
        log_x=log_x,
        refs=refs,
        y_range=(_low(report), 1.02),
        x_range=(1.0, float(n_max)) if n_max > 1 else None,
        band_legend=False,
    )
    return line_chart(chart, chart_id)


def heat_rows(section: Mapping[str, Any]) -> list[list[float]]:
    """layers × heads of c_m (NaN where a layer has fewer heads than the widest)."""
    rows = [floats(layer.get("heads_at_m")) for layer in as_maps(section.get("layers"))]
    width = max((len(r) for r in rows), default=0)
    return [r + [math.nan] * (width - len(r)) for r in rows]


def heatmaps(report: Report) -> str:
    """The layers × heads heatmap of c_m per panel, on one colour scale (figures, side by side in a pair)."""
    ps = panels(report)
    tables = [heat_rows(s) for s, _, _ in ps]
    finite = [v for t in tables for row in t for v in row if math.isfinite(v)]
    if not finite:
        return missing("c_m per head (heads_at_m)")
    vrange = (min(finite), max(max(finite), min(finite) + 1e-6))
    out = []
    for (section, title, suffix), rows in zip(ps, tables, strict=True):
        labels = [f"layer {layer.get('index')}" for layer in as_maps(section.get("layers"))]
        cols = [f"head {j}" for j in range(max((len(r) for r in rows), default=0))]
        out.append(
            heatmap(rows, labels, cols, f"{title}: c_m, {_m_label(section)}", "c_m", f"heat-{suffix}", vrange)
        )
    return "".join(out)


def figures(report: Report) -> str:
    """The curves of each panel and the heatmaps, two per row where they fit; a part that an older report
    lacks is a note, the others still drawn."""
    parts = []
    for section, title, suffix in panels(report):

        def curves(section: Mapping[str, Any] = section, title: str = title, suffix: str = suffix) -> str:
            return curves_chart(report, section, title, f"curves-{suffix}")

        parts.append(guarded("", title, curves).html)
    parts.append(guarded("", "Layers × heads: c_m", lambda: heatmaps(report)).html)
    return '<div class="pair">' + "".join(parts) + "</div>"


def _rank(agg: object, n: object) -> Cell:
    v = stat(agg)
    return Cell("—") if v is None else Cell(f"{num(v)} / {n}", v)


def _layer_cells(layer: Mapping[str, Any]) -> list[Cell | str]:
    heads = [v for v in floats(layer.get("heads_at_m")) if math.isfinite(v)]
    spread = (
        Cell(
            f"{min(heads):.3f}–{max(heads):.3f}", min(heads), title=f"{full(min(heads))} – {full(max(heads))}"
        )
        if heads
        else Cell("—")
    )
    return [
        _c(stat(layer.get("at_m"))),
        spread,
        _rank(layer.get("rank90"), layer.get("n")),
        number(stat(layer.get("erank"))),
    ]


def layer_table(report: Report) -> str:
    """Per layer: P, c_m, heads min–max, rank at 90 %, erank; conditioned columns where run."""
    ps = panels(report)
    plain = ps[0][0]
    cond = next((s for s, _, suffix in ps if suffix == "cond"), None)
    lam = lam_text(report)
    header = ["layer", "name", "P", "c_m", "heads min–max", "rank 90%", "erank"]
    if cond is not None:
        header += [f"c_m +{lam}I", f"heads +{lam}I", f"rank 90% +{lam}I", f"erank +{lam}I"]
    other = {layer.get("index"): layer for layer in as_maps(cond.get("layers"))} if cond is not None else {}
    rows: list[list[Cell | str]] = []
    for layer in as_maps(plain.get("layers")):
        shape = f"{layer.get('attention', 'P')}, n = {layer.get('n', '?')}"
        if plain.get("index_m") is None and layer.get("index_m") is not None:
            shape += f", m = {layer.get('index_m')}"
        row: list[Cell | str] = [number(to_float(layer.get("index")), 6), str(layer.get("name", "")), shape]
        row += _layer_cells(layer)
        if cond is not None:
            twin = other.get(layer.get("index"))
            row += _layer_cells(twin) if twin is not None else [Cell("—")] * 4
        rows.append(row)
    caption = (
        f"rank decay of P per layer ({_m_label(plain)}; medians over samples × windows × heads; "
        "c_m: share of Σσ in the m largest σ)"
    )
    note = (
        "c_m near 1 with a small rank 90% is a low-rank P (Linformer); erank is RankMe's effective rank "
        "exp(−Σ p_i log p_i), p_i = σ_i/Σσ."
    )
    return table(header, rows, caption, "table-rank") + f'<p class="footnote">{escape(note)}</p>'


def _heads_chart(layer: Mapping[str, Any], title: str, chart_id: str, low: float) -> str:
    heads = as_maps(layer.get("heads_detail"))
    series = []
    n = 1
    for h in heads:
        median = floats(as_map(h.get("cumulative")).get("median"))
        if not median:
            continue
        n = max(n, len(median))
        j = to_float(h.get("head")) or 0.0
        series.append(
            Series(
                f"head {h.get('head')}",
                [float(i) for i in range(1, len(median) + 1)],
                median,
                depth_color(j / max(1.0, len(heads) - 1.0)),
                width=1.2,
                values=False,
            )
        )
    if not series:
        return ""
    m = to_float(layer.get("index_m"))
    chart = Chart(
        title,
        "singular value index j" + (" (log scale)" if n > 16 else ""),
        Y_LABEL,
        series,
        log_y=False,
        log_x=n > 16,
        refs=[RefLine(m, f"m = {num(m, 6)}", "#808080", "x", "2 3")] if m else [],
        y_range=(low, 1.02),
        x_range=(1.0, float(n)) if n > 1 else None,
        width=560,
    )
    return line_chart(chart, chart_id)


def _heads_table(layer: Mapping[str, Any], table_id: str) -> str:
    rows: list[list[Cell | str]] = []
    for h in as_maps(layer.get("heads_detail")):
        rows.append(
            [
                number(to_float(h.get("head")), 6),
                _c(stat(h.get("at_m"))),
                _rank(h.get("rank90"), layer.get("n")),
                number(stat(h.get("erank"))),
            ]
        )
    m = layer.get("index_m", "m")
    return table(["head", f"c_{m}", "rank 90%", "erank"], rows, "medians over samples and windows", table_id)


def per_layer(report: Report) -> str:
    """Per layer (picked with JS, all shown without): its heads' curves and table, plain and conditioned."""
    ps = panels(report)
    low = _low(report)
    blocks, options = [], []
    for layer in as_maps(ps[0][0].get("layers")):
        index = str(layer.get("index"))
        label = f"layer {index} {layer.get('name', '')}"
        options.append((index, label))
        parts = []
        for section, title, suffix in ps:
            twin = next((x for x in as_maps(section.get("layers")) if str(x.get("index")) == index), None)
            if twin is None or not as_maps(twin.get("heads_detail")):
                continue
            parts.append(
                _heads_chart(twin, f"{label}, {title}: c_j per head", f"heads-{suffix}-{index}", low)
            )
            parts.append(_heads_table(twin, f"table-heads-{suffix}-{index}"))
        if parts:
            blocks.append(
                f'<details open data-pick="{escape(index)}"><summary>{escape(label)}</summary>'
                f'<div class="pair">{"".join(parts)}</div></details>'
            )
    if not blocks:
        return missing("per-head detail (run with heads)")
    return (
        picker("rank-heads", "layer", options, "all layers") + f'<div id="rank-heads">{"".join(blocks)}</div>'
    )


def sections(report: Report) -> list[Section]:
    """The curves, the heatmap, the table, per-layer heads, the notes."""
    ps = panels(report)
    if not ps:
        return [Section("rank-decay", "Rank decay", missing("the rank decay of P"))]
    lacks = "" if ps[0][2] == "plain" else missing("the plain forward's rank decay")
    out = [
        Section("rank-curves", "Rank decay of P (Linformer, Figure 1)", lacks + figures(report)),
        guarded("rank-table", "Per-layer table", lambda: layer_table(report)),
    ]
    if any(as_maps(layer.get("heads_detail")) for s, _, _ in ps for layer in as_maps(s.get("layers"))):
        out.append(guarded("rank-heads", "Per layer: heads", lambda: per_layer(report)))
    if conditioned_note(report):
        out.append(Section("conditioned", "Conditioned forward", conditioned_note(report)))
    notes = notes_html(report)
    if notes:
        out.append(Section("notes", "Notes", notes))
    return out
