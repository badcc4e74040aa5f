"""The sections of a ``rank-decay`` report (Linformer, Figure 1): the normalized cumulative spectrum c_j of P,
one curve per layer coloured by depth with its p10–p90 band, the layers × heads heatmap of c_m (both
described in :mod:`condcli.figures.rank`, which the PNGs draw too), the per-layer table (c_m, rank at 90 %,
erank), and per layer its heads' curves and table, picked by layer. With a conditioned forward each figure
and table has its conditioned twin."""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.figures import Heatmap
from condcli.figures import rank as described
from condcli.figures.labels import html_text
from condcli.html.controls import picker
from condcli.html.described import chart, heat
from condcli.html.numbers import floats, full, num, stat, to_float
from condcli.html.section import (
    Report,
    Section,
    as_maps,
    conditioned_note,
    guarded,
    lam_text,
    missing,
    notes_section,
)
from condcli.html.tables import Cell, number, table


def panels(report: Report) -> list[tuple[Mapping[str, Any], str, str]]:
    """(rank_decay section, title, id suffix) for the plain forward and, where run, the conditioned one."""
    return described.sections(report)


def _c(v: float | None) -> Cell:
    """A cumulative share: three decimals (c lives in (0, 1])."""
    return Cell("—") if v is None or math.isnan(v) else Cell(f"{v:.3f}", v)


def heatmaps(report: Report) -> str:
    """The layers × heads heatmap of c_m per panel, on one colour scale (figures, side by side in a pair)."""
    figure = described.heatmap(report)
    if not any(isinstance(h, Heatmap) and h.vrange is not None for h in figure.panels):
        return missing("c_m per head (heads_at_m)")
    return "".join(
        heat(h, f"heat-{suffix}")
        for h, (_, _, suffix) in zip(figure.panels, panels(report), strict=True)
        if isinstance(h, Heatmap)
    )


def figures(report: Report) -> str:
    """The curves of each panel and the heatmaps, two per row where they fit; a part that an older report
    lacks is a note, the others still drawn."""
    parts = []
    for section, title, suffix in panels(report):

        def curves(section: Mapping[str, Any] = section, title: str = title, suffix: str = suffix) -> str:
            return chart(described.curves_panel(report, section, title), f"curves-{suffix}")

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
        f"rank decay of P per layer ({described.m_label(plain)}; medians over samples × windows × heads; "
        "c_m: share of Σσ in the m largest σ)"
    )
    note = (
        "c_m near 1 with a small rank 90% is a low-rank P (Linformer); erank is RankMe's effective rank "
        "exp(−Σ p_i log p_i), p_i = σ_i/Σσ."
    )
    return table(header, rows, caption, "table-rank") + f'<p class="footnote">{html_text(note)}</p>'


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
    low = described.low(report)
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
            heads = described.heads_panel(twin, f"{label}, {title}: c_j per head", low)
            parts.append(chart(heads, f"heads-{suffix}-{index}") if heads.drawn() else "")
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
    out += notes_section(report)
    return out
