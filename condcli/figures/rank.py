"""The figures of a ``rank-decay`` report (Linformer, Figure 1): the normalized cumulative spectrum c_j of P,
one curve per layer coloured by depth with its p10–p90 band, and the layers × heads heatmap of c_m; with a
conditioned forward each gets a second panel on the same scales. Also the page's per-layer charts of its
heads' curves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from condcli.figures import model
from condcli.figures.common import (
    Report,
    as_map,
    as_maps,
    counting,
    floats,
    lam_text,
    median,
    title,
    to_float,
)
from condcli.figures.model import Axis, Band, Dash, DepthBar, Figure, Heatmap, Panel, Ref, Series, depth
from condcli.figures.palette import DEPTH_TOP
from condcli.numbers import num

# the part of viridis the layers span: its near-black start hid layer 0's band, its yellow end the last layer
DEPTH_RANGE = (0.15, DEPTH_TOP)
Y_LABEL = "c_j: share of Σσ in the j largest σ of P"
LOG_X_ABOVE = 16  # the index axis is logarithmic beyond this many singular values
# where a logarithmic index axis is labelled: every index up to 5 (a rank at 90 % is most often one of
# them), then 1, 2 and 5 of each decade, so that the rank a curve crosses 0.9 at reads off the axis
INDEX_TICKS = (1, 2, 3, 4, 5)
# neighbouring layers differ in dash as well as colour (viridis' greens are close in thin lines)
LAYER_DASHES: tuple[Dash, ...] = ("solid", "dashed", "dashdot")


def sections(report: Report) -> list[tuple[Mapping[str, Any], str, str]]:
    """(rank_decay section, title, id suffix) for the plain forward and, where run, the conditioned one."""
    out = []
    plain = as_map(report.get("rank_decay"))
    if as_maps(plain.get("layers")):
        out.append((plain, "plain forward", "plain"))
    cond = as_map(report.get("rank_decay_conditioned"))
    if as_maps(cond.get("layers")):
        out.append((cond, f"conditioned forward (X + {lam_text(report)}·I_k)", "cond"))
    return out


def m_label(section: Mapping[str, Any]) -> str:
    m = section.get("index_m")
    return f"m = {m}" if m is not None else "m = round(n/4) per layer"


def _depth(report: Report) -> tuple[float, float]:
    idx = [
        to_float(la.get("index")) or 0.0 for s, _, _ in sections(report) for la in as_maps(s.get("layers"))
    ]
    lo = min(idx, default=0.0)
    return lo, max(max(idx, default=1.0), lo + 1)


def low(report: Report) -> float:
    """The bottom of the y range every panel shares: the lowest p10 less 0.05, not below 0."""
    lows = [
        v
        for s, _, _ in sections(report)
        for layer in as_maps(s.get("layers"))
        for v in floats(as_map(layer.get("cumulative")).get("p10"))
        or floats(as_map(layer.get("cumulative")).get("median"))
        if math.isfinite(v)
    ]
    return max(0.0, min(lows, default=0.0) - 0.05)


def index_ticks(n: int, ranks: Sequence[float] = ()) -> tuple[float, ...]:
    """The labelled indices of a logarithmic index axis up to ``n``: 1–5, then 10, 20, 50, 100, …, and
    the ranks at 90 % of the layers drawn (``ranks``, their medians), so that each reads off the axis."""
    decades = (m * 10.0**e for e in range(1, 1 + max(1, math.ceil(math.log10(max(n, 2))))) for m in (1, 2, 5))
    wanted = {*INDEX_TICKS, *decades, *(round(r) for r in ranks if math.isfinite(r))}
    return tuple(sorted(float(v) for v in wanted if 1 <= v <= n))


def rank90s(items: Sequence[Mapping[str, Any]]) -> list[float]:
    """The median rank at 90 % of each layer or head (NaN where it has none)."""
    return [median(item.get("rank90")) for item in items]


def _index_axis(n: int, ranks: Sequence[float] = ()) -> Axis:
    log = n > LOG_X_ABOVE
    label = "singular value index j" + (" (log scale)" if log else "")
    ticks = index_ticks(n, ranks) if log else ()
    return Axis(label, "log" if log else "lin", (1.0, float(n)) if n > 1 else None, integer=True, ticks=ticks)


def _m_ref(m: float | None) -> list[Ref]:
    return [Ref(m, f"m = {num(m, 6)}", "index", "x", "dotted", annotate=True)] if m else []


def _curve(
    name: str, item: Mapping[str, Any], t: float, band: bool, dash: Dash = "solid", **extra: Any
) -> Series | None:
    """The median c_j of a layer or head (``item["cumulative"]``) coloured by depth ``t``, with its p10–p90
    band if ``band``; None where it has none."""
    cumulative = as_map(item.get("cumulative"))
    med, p10, p90 = (floats(cumulative.get(q)) for q in ("median", "p10", "p90"))
    if not med:
        return None
    drawn = Band(p10, p90, alpha=model.BAND_ALPHA / 2) if band and len(p10) == len(p90) == len(med) else None
    return Series(name, counting(len(med)), med, depth(t, DEPTH_RANGE), dash, width=1.2, band=drawn, **extra)


def curves_panel(report: Report, section: Mapping[str, Any], name: str) -> Panel:
    """c_j against j, one median curve per layer with its p10–p90 band, a dotted line at a common m."""
    lo, hi = _depth(report)
    series = []
    for i, layer in enumerate(as_maps(section.get("layers"))):
        index = to_float(layer.get("index")) or 0.0
        t = (index - lo) / (hi - lo)
        dash = LAYER_DASHES[i % len(LAYER_DASHES)]
        curve = _curve(
            f"layer {layer.get('index')}", layer, t, band=True, dash=dash, group=f"layer-{layer.get('index')}"
        )
        if curve is not None:
            series.append(curve)
    n = max((len(s.x) for s in series), default=1)
    return Panel(
        f"{name}: median over heads and samples, p10–p90",
        _index_axis(n, rank90s(as_maps(section.get("layers")))),
        Axis(Y_LABEL, "lin", (low(report), 1.02)),
        series,
        _m_ref(to_float(section.get("index_m"))),
        legend_shown=len(series) <= model.LEGEND_MAX,
        depth=DepthBar(lo, hi, "layer", DEPTH_RANGE),
        missing="the cumulative spectra",
    )


def curves(report: Report) -> Figure:
    """Linformer's Figure 1 (left): the normalized cumulative spectrum of P, one curve per layer."""
    panels = [curves_panel(report, s, name) for s, name, _ in sections(report)]
    size = (6.5 * len(panels) + 1.0, 4.5)
    what = "Rank decay of the attention probabilities P"
    return Figure(title(report, what), panels, size, grid=(1, len(panels)), share_y=True)


def heat_rows(section: Mapping[str, Any]) -> list[list[float]]:
    """layers × heads of c_m (NaN where a layer has fewer heads than the widest)."""
    rows = [floats(layer.get("heads_at_m")) for layer in as_maps(section.get("layers"))]
    width = max((len(r) for r in rows), default=0)
    return [r + [math.nan] * (width - len(r)) for r in rows]


def scale(rows: list[list[float]]) -> tuple[float, float] | None:
    """One panel's colour scale: the range of its own c_m (None without one)."""
    finite = [v for row in rows for v in row if math.isfinite(v)]
    return (min(finite), max(max(finite), min(finite) + 1e-6)) if finite else None


def heatmap(report: Report) -> Figure:
    """Linformer's Figure 1 (right): c_m for every layer and head, each panel on its own colour scale.

    One scale per panel, not one for both: the plain and the conditioned forward's c_m hardly overlap
    (the sample ViT's: 0.992–1.000 against 0.952–0.964), so a shared scale spends nearly all its colours on
    the gap between them and leaves each panel one colour (plain pale, conditioned black), hiding how heads
    and layers differ, which is what the heatmap is for. The values are written in the cells, and each
    panel has its own colour bar, so the panels still compare by number."""
    found = sections(report)
    tables = [heat_rows(s) for s, _, _ in found]
    panels = [
        Heatmap(
            f"{name}: c_m, {m_label(section)}",
            [str(layer.get("index")) for layer in as_maps(section.get("layers"))],
            [str(j) for j in range(max((len(r) for r in rows), default=0))],
            rows,
            "c_m",
            vrange=scale(rows),
            bar_label="c_m (share of Σσ in the m largest σ)",
        )
        for (section, name, _), rows in zip(found, tables, strict=True)
    ]
    n_rows, n_cols = (len(tables[0]), len(tables[0][0]) if tables[0] else 0) if tables else (0, 0)
    size = (max(4.5, 0.45 * n_cols + 2.5) * len(panels) + 1.0, max(3.5, 0.35 * n_rows + 1.8))
    return Figure(title(report, "Rank decay per layer and head"), panels, size, grid=(1, max(1, len(panels))))


def heads_panel(layer: Mapping[str, Any], name: str, bottom: float) -> Panel:
    """One layer's c_j per head (the page's per-layer detail), on the y range of the layer curves."""
    heads = as_maps(layer.get("heads_detail"))
    series = []
    top = max(1.0, len(heads) - 1.0)
    for h in heads:
        curve = _curve(
            f"head {h.get('head')}", h, (to_float(h.get("head")) or 0.0) / top, band=False, hover=False
        )
        if curve is not None:
            series.append(curve)
    n = max((len(s.x) for s in series), default=1)
    return Panel(
        name,
        _index_axis(n, rank90s(heads)),
        Axis(Y_LABEL, "lin", (bottom, 1.02)),
        series,
        _m_ref(to_float(layer.get("index_m"))),
        legend_shown=len(series) <= model.LEGEND_MAX,
        depth=DepthBar(0.0, top, "head", DEPTH_RANGE),
    )
