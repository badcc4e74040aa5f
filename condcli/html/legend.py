"""The parts of a page's chart beside the plot: the legend (each entry with a sample of what it names: a
band's area, a line, an inf marker's triangle) and the colour bar of a chart coloured by depth."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from condcli.figures import BAND_ALPHA
from condcli.figures.labels import svg_text
from condcli.html.heatmap import VIRIDIS, color_at
from condcli.html.numbers import num

Item = tuple[str, str, str, str, str]  # name, color, dash, group, kind ("band", "line", "inf", "ref")


LEGEND_ROW = 20  # px: one row of the legend
ENTRY_CHAR = 7.6  # px: the width of an average character of an entry (14 px)


def per_row(items: list[Item], width: float = 500) -> int:
    """How many entries a row of the legend holds in ``width`` px: as many as fit the longest (up to 4)."""
    longest = max((len(i[0]) for i in items), default=0)
    return max(1, min(4, int(width // (longest * ENTRY_CHAR + 40))))


def _mark(x: float, y: float, color: str, dash: str, kind: str) -> str:
    """A legend entry's sample: a band's area, an inf marker's triangle, or a line."""
    if kind == "band":
        return (
            f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="18" height="8" fill="{color}" '
            f'fill-opacity="{BAND_ALPHA}"/>'
        )
    if kind == "inf":
        tip = f"M{x + 4:.1f},{y:.1f} L{x + 14:.1f},{y:.1f} L{x + 9:.1f},{y - 9:.1f} Z"
        return f'<path d="{tip}" fill="{color}"/>'
    return (
        f'<line x1="{x:.1f}" x2="{x + 18:.1f}" y1="{y - 4:.1f}" y2="{y - 4:.1f}" stroke="{color}" '
        f'stroke-width="3" stroke-dasharray="{dash}"/>'
    )


def legend(items: list[Item], per_row: int, left: float, y0: float, pw: float) -> str:
    """The legend under the x label: ``per_row`` items a row, each with its line (or band) sample."""
    col = pw / per_row
    out = ['<g class="legend">']
    for i, (name, color, dash, group, kind) in enumerate(items):
        x, y = left + (i % per_row) * col, y0 + LEGEND_ROW * (i // per_row)
        g = f' data-group="{escape(group)}"' if group else ""
        out.append(
            f'<g class="item"{g}>{_mark(x, y, color, dash, kind)}<text x="{x + 26:.1f}" y="{y:.1f}" '
            f'class="leg">{svg_text(name)}</text></g>'
        )
    out.append("</g>")
    return "".join(out)


@dataclass
class DepthBar:
    """A colour bar of depth: indices ``lo`` (bottom) to ``hi`` (top), colours from ``color_of(t)``."""

    lo: float
    hi: float
    label: str
    span: tuple[float, float] = (0.0, 1.0)


def depth_bar(bar: DepthBar, x0: float, top: float, ph: float) -> str:
    """The bar right of the plot: 20 steps of viridis over ``bar.span``, its ends' indices and its label."""
    a, b = bar.span
    x = x0 + 8
    out = ['<g class="depthbar">']
    for k in range(20):
        out.append(
            f'<rect x="{x:.1f}" y="{top + ph * (19 - k) / 20:.2f}" width="10" height="{ph / 20 + 0.5:.2f}" '
            f'fill="{color_at(VIRIDIS, a + (b - a) * k / 19)}"/>'
        )
    out.append(f'<text x="{x + 13:.1f}" y="{top + 8:.1f}" class="tick">{num(bar.hi, 4)}</text>')
    out.append(f'<text x="{x + 13:.1f}" y="{top + ph:.1f}" class="tick">{num(bar.lo, 4)}</text>')
    out.append(
        f'<text transform="translate({x + 40:.1f} {top + ph / 2:.1f}) rotate(-90)" class="tick" '
        f'text-anchor="middle">{svg_text(bar.label)}</text></g>'
    )
    return "".join(out)
