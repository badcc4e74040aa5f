"""Inline SVG heatmaps (layers × heads), and the colormaps the page shares with :mod:`condcli.plots`
(magma for heatmaps, viridis for depth), sampled from matplotlib's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from condcli.figures.labels import shown, svg_text
from condcli.html.numbers import full, num

# magma (plots.draw.HEAT_CMAP) and viridis (plots.draw.DEPTH_CMAP), sampled at 0, 1/16, …, 1
MAGMA = (
    "#000004", "#0a0822", "#1d1147", "#36106b", "#51127c", "#6a1c81", "#832681", "#9c2e7f", "#b73779",
    "#d0416f", "#e75263", "#f56b5c", "#fc8961", "#fea772", "#fec488", "#fde2a3", "#fcfdbf",
)  # fmt: skip
VIRIDIS = (
    "#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e", "#21918c",
    "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219", "#fde725",
)  # fmt: skip


def color_at(stops: Sequence[str], t: float) -> str:
    """The colour at ``t`` in [0, 1] of a colormap given by evenly spaced hex stops (linear in RGB)."""
    t = min(1.0, max(0.0, t)) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    f = t - i
    a, b = stops[i], stops[i + 1]
    rgb = [round(int(a[k : k + 2], 16) * (1 - f) + int(b[k : k + 2], 16) * f) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def heatmap(
    values: Sequence[Sequence[float]],
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str,
    what: str,
    chart_id: str,
    vrange: tuple[float, float] | None = None,
    digits: int = 3,
    log: bool = False,
) -> str:
    """A rows × columns heatmap (magma); NaN cells are blank; each cell carries ``data-value`` (full
    precision) and a ``<title>`` "row, column: what = value"; the value is written into cells up to 400
    (``digits`` decimals; with ``log``, a log colour scale and ``digits`` significant digits)."""
    finite = [v for row in values for v in row if math.isfinite(v)]
    if log:  # a log colour scale: only positive values are coloured
        finite = [v for v in finite if v > 0]
    lo, hi = vrange or ((min(finite), max(finite)) if finite else (1.0, 10.0) if log else (0.0, 1.0))
    scale = (lambda v: math.log10(v)) if log else (lambda v: v)
    span = (scale(hi) - scale(lo)) or 1e-6
    cols = max((len(r) for r in values), default=0)
    cw, ch = max(52 if log else 28, min(56, 560 // max(cols, 1))), 22
    left, top = 110, 30
    width = max(left + cw * cols + 110, 16 + round(8.8 * len(title)))
    height = top + ch * len(values) + 40
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(shown(title))}" class="heatmap" '
        f'id="{escape(chart_id)}">',
        f"<title>{escape(shown(title))}</title>",
        f'<text x="8" y="18" class="ctitle">{svg_text(title)}</text>',
    ]
    write = len(finite) <= 400
    for i, row in enumerate(values):
        y = top + i * ch
        out.append(
            f'<text x="{left - 6}" y="{y + 15}" class="tick" text-anchor="end">{escape(row_labels[i])}</text>'
        )
        for j, v in enumerate(row):
            if not math.isfinite(v) or (log and v <= 0):
                continue
            t = (scale(v) - scale(lo)) / span
            x = left + j * cw
            out.append(
                f'<g class="cell"><rect x="{x}" y="{y}" width="{cw}" height="{ch}" '
                f'fill="{color_at(MAGMA, t)}" data-value="{full(v)}" data-row="{i}" data-col="{j}">'
                f"<title>{escape(row_labels[i])}, {escape(col_labels[j])}: {escape(shown(what))} = {full(v)}"
                "</title></rect>"
            )
            if write:
                fg = "#fff" if t < 0.5 else "#000"
                out.append(
                    f'<text x="{x + cw / 2}" y="{y + 15}" class="cellv" fill="{fg}" '
                    f'text-anchor="middle">{num(v, digits) if log else f"{v:.{digits}f}"}</text>'
                )
            out.append("</g>")
    for j, label in enumerate(col_labels):
        out.append(
            f'<text x="{left + j * cw + cw / 2}" y="{top + ch * len(values) + 14}" class="tick" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    bx = left + cw * cols + 20
    bh = ch * len(values)
    for k in range(20):
        out.append(
            f'<rect x="{bx}" y="{top + bh * (19 - k) / 20:.2f}" width="14" height="{bh / 20 + 0.5:.2f}" '
            f'fill="{color_at(MAGMA, k / 19)}"/>'
        )
    out.append(f'<text x="{bx + 18}" y="{top + 8}" class="tick">{num(hi, 4)}</text>')
    out.append(f'<text x="{bx + 18}" y="{top + bh}" class="tick">{num(lo, 4)}</text>')
    out.append("</svg>")
    return f'<figure class="fig heat">{"".join(out)}</figure>'
