"""Drawing a :mod:`condcli.figures` description on the page: a :class:`~condcli.figures.Panel` as an inline
SVG line chart (:mod:`.svg`), a :class:`~condcli.figures.Heatmap` as an SVG heatmap (:mod:`.heatmap`). The
PNG (:mod:`condcli.plots`) draws the same descriptions, so both show the same series, bands, reference
lines, scales, labels and legend."""

from __future__ import annotations

from condcli.figures import BAND_ALPHA, Heatmap, Panel, depth_of
from condcli.figures.palette import ROLE_COLORS
from condcli.html.heatmap import VIRIDIS, color_at, heatmap
from condcli.html.legend import DepthBar, Item
from condcli.html.section import missing
from condcli.html.svg import WIDTH, Chart, RefLine, Series, line_chart

# the page's colour of each role: the PNG's (Okabe–Ito, condcli.figures.palette)
PALETTE = ROLE_COLORS
DASH = {"solid": "", "dashed": "6 4", "dashdot": "8 3 2 3", "dotted": "2 3"}
PX_PER_PT = 1.2  # a line's width on the page per point of the description


def color(name: str) -> str:
    """A description's colour as the page's: a role from :data:`PALETTE`, a depth from viridis."""
    t = depth_of(name)
    return color_at(VIRIDIS, t) if t is not None else PALETTE.get(name, name)


def chart(panel: Panel, chart_id: str, width: int = WIDTH) -> str:
    """The panel as a ``<figure>`` with an inline SVG line chart; the note :func:`missing` where it draws
    nothing. The page draws every chart across its full width, so ``width`` (the viewBox's) is at least
    :data:`~condcli.html.svg.WIDTH`: a narrower viewBox would only scale its text up."""
    width = max(width, WIDTH)
    drawn = panel.drawn()
    if not drawn:
        return missing(f"{panel.title}: {panel.missing}" if panel.missing else panel.title)
    series = [
        Series(
            s.name,
            list(s.x),
            list(s.y),
            color(s.color),
            DASH[s.dash],
            band=(list(s.band.lo), list(s.band.hi)) if s.band is not None else None,
            markers=s.markers,
            group=s.group,
            width=round(s.width * PX_PER_PT, 2),
            band_name=s.band.name if s.band is not None else "",
            values=s.hover,
            band_opacity=s.band.alpha if s.band is not None else BAND_ALPHA,
            marker=s.marker,
        )
        for s in drawn
    ]
    refs = [
        RefLine(r.value, r.name, color(r.color), r.axis, DASH[r.dash] or "none", label=r.annotate)
        for r in panel.refs_drawn()
    ]
    items: list[Item] = [(e.name, color(e.color), DASH[e.dash], e.group, e.kind) for e in panel.legend()]
    bar = panel.depth
    return line_chart(
        Chart(
            panel.title,
            panel.x.label,
            panel.y.label,
            series,
            log_y=panel.y.log,
            log_x=panel.x.log,
            refs=refs,
            y_range=panel.y.range,
            x_range=panel.x.range,
            width=width,
            legend=panel.legend_shown,
            integer_x=panel.x.integer,
            x_ticks=panel.x.ticks,
            items=items,
            inf_level=panel.inf_level(),
            depth=DepthBar(bar.lo, bar.hi, bar.label, bar.span)
            if bar is not None and not panel.legend_shown
            else None,
        ),
        chart_id,
    )


def heat(h: Heatmap, chart_id: str) -> str:
    """The heatmap as a ``<figure>`` with an inline SVG (rows and columns named "layer 3", "head 1")."""
    return heatmap(
        [list(row) for row in h.values],
        [f"{h.ylabel} {r}" for r in h.rows],
        [f"{h.xlabel} {c}" for c in h.cols],
        h.title,
        h.what,
        chart_id,
        h.vrange,
        h.digits,
        h.log,
    )
