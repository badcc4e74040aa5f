"""Inline SVG charts drawn from a report's numbers: line charts (log or linear y, p10–p90 bands, legend,
'▲' markers for +inf, reference lines, a depth colour bar); heatmaps and the colormaps are in
:mod:`condcli.html.heatmap`. What a figure shows is decided by its description (:mod:`condcli.figures`),
which :mod:`condcli.html.described` turns into a :class:`Chart`.

The axis transform is stated on each ``<svg>`` so that anyone can recompute it: ``data-plot`` is the plot
box "left top width height" in px, ``data-x``/``data-y`` the domain "lo hi lin|log". A value v maps to
px = left + width·(t(v) − t(lo))/(t(hi) − t(lo)) with t = log10 on a log axis (y grows downwards:
py = top + height − …). Every polyline carries its values in full precision (``data-xs``/``data-ys``);
the hover values come from ``<title>`` elements (no JS) and from those attributes (JS).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from condcli.figures import BAND_ALPHA
from condcli.figures.labels import shown, svg_text
from condcli.html.heatmap import MAGMA, VIRIDIS, color_at, heatmap
from condcli.html.legend import LEGEND_ROW, DepthBar, Item, depth_bar, legend
from condcli.html.legend import per_row as legend_per_row
from condcli.html.numbers import full, num

WIDTH, HEIGHT = 960, 400  # px of the viewBox; the page draws each chart across its full width
MARGIN = (84, 34, 66, 64)  # left, top (title), bottom (legend), right: px
TITLE_PX = 20  # a title line's height; a title wider than the chart is wrapped onto several
TITLE_CHAR = 8.6  # px: the width of an average character of a title (16 px, semibold)
MARKERS_MAX = 60  # a series with at most this many points gets a marker with a <title> per point


@dataclass
class Series:
    """One curve: ``y`` may hold NaN (not drawn) and +inf (a '▲' at the inf level); ``band`` the p10/p90
    values drawn as a translucent area; ``group`` a class the page's toggles show or hide."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    color: str
    dash: str = ""
    band: tuple[Sequence[float], Sequence[float]] | None = None
    markers: bool = False
    group: str = ""
    width: float = 1.8
    band_name: str = ""  # the band's legend entry (default "<name>: p10–p90")
    values: bool = True  # carry the values (data-ys; data-xs unless x is 1, 2, …, n) for the JS hover
    band_opacity: float = BAND_ALPHA
    marker: str = "circle"  # or "square": hollow and larger, round the dot of a series it coincides with


@dataclass
class RefLine:
    """A horizontal (``axis="y"``) or vertical (``axis="x"``) reference line at ``value`` with a legend;
    ``label``: its name also written beside the line, in the plot (a marker the eye must find)."""

    value: float
    name: str
    color: str
    axis: str = "y"
    dash: str = "6 4"
    label: bool = False


@dataclass
class Chart:
    """A line chart; ``y_range``/``x_range`` fix a linear axis' domain (else it fits the data)."""

    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    log_y: bool = True
    log_x: bool = False
    refs: list[RefLine] = field(default_factory=list)
    y_range: tuple[float, float] | None = None
    x_range: tuple[float, float] | None = None
    width: int = WIDTH
    height: int = HEIGHT
    legend: bool = True
    integer_x: bool = False  # x ticks at integers only (layer indices)
    band_legend: bool = True  # a legend entry for each band
    items: list[Item] | None = None  # the legend's entries (else each series, its band, each line)
    inf_level: float | None = None  # where +inf is drawn (else a decade above the largest finite value)
    depth: DepthBar | None = None  # a depth colour bar right of the plot
    x_ticks: Sequence[float] = ()  # where to label the x axis (else :func:`_ticks`' choice)


def _ok(v: float, log: bool) -> bool:
    return math.isfinite(v) and (v > 0 or not log)


def _t(v: float, log: bool) -> float:
    return math.log10(v) if log else v


def _domain(values: list[float], log: bool) -> tuple[float, float]:
    """The axis range of ``values`` (only those the axis can show): decades on a log axis, 4 % padding on a
    linear one; (1, 10) or (0, 1) without any."""
    ok = [v for v in values if _ok(v, log)]
    if not ok:
        return (1.0, 10.0) if log else (0.0, 1.0)
    lo, hi = min(ok), max(ok)
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return 10.0**a, 10.0 ** max(b, a + 1)
    pad = (hi - lo) * 0.04 or max(abs(hi) * 0.05, 0.5)
    return lo - pad, hi + pad


EDGE = 0.03  # a vertical reference line this close to an end of the x axis (share of its span) gets room


def _edge_room(lo: float, hi: float, log: bool, marks: list[float]) -> tuple[float, float]:
    """The x domain widened by :data:`EDGE` of its span on a side where a vertical reference line would
    otherwise sit on the plot's frame (e.g. the recommended λ at the end of the grid)."""
    if not marks or not hi > lo:
        return lo, hi
    a, b = _t(lo, log), _t(hi, log)
    span = b - a
    ts = [_t(v, log) for v in marks if _ok(v, log)]
    if any(t - a < EDGE * span for t in ts):
        a -= EDGE * span
    if any(b - t < EDGE * span for t in ts):
        b += EDGE * span
    return (10.0**a, 10.0**b) if log else (a, b)


FEW_DECADES = 3  # a log axis of up to this many decades (its domain is whole decades) labels 1, 2, 5 of each


def _ticks(lo: float, hi: float, log: bool, integer: bool = False) -> list[float]:
    if log and math.log10(hi / lo) <= FEW_DECADES:  # between the decades too, so that values read off it
        e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        near = [m * 10.0**e for e in range(e0, e1 + 1) for m in (1, 2, 5)]
        return [v for v in near if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    if log:
        a, b = round(math.log10(lo)), round(math.log10(hi))
        every = max(1, math.ceil((b - a) / 8))
        return [10.0**e for e in range(a, b + 1, every) if lo * (1 - 1e-9) <= 10.0**e <= hi * (1 + 1e-9)]
    span = hi - lo
    raw = span / 5
    mag = 10.0 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * mag for m in steps if m * mag >= raw)
    step = max(step, 1.0) if integer else step
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _power(mantissa: str, exponent: int) -> str:
    """ "10" with a superscript exponent (a mantissa other than 1 before it: "2.5×10⁵"), as SVG text."""
    lead = "" if mantissa == "1" else f"{mantissa}×"
    return f'{lead}10<tspan class="sup" baseline-shift="super" font-size="75%">{exponent}</tspan>'


def tick_labels(ticks: list[float], log: bool) -> list[str]:
    """The labels of one axis' ticks, all in one format: plain numbers ("0.01", "1000") where every tick
    reads well so, else every one as a power of ten ("10⁻⁴", "2.5×10⁵"; SVG markup)."""
    plain = all(v == 0 or 1e-3 <= abs(v) < 1e4 for v in ticks)
    if plain:
        return [f"{v:g}" if log else f"{v:.4g}" for v in ticks]
    out = []
    for v in ticks:
        if v == 0:
            out.append("0")
            continue
        e = math.floor(math.log10(abs(v)) + 1e-9)
        mantissa = f"{v / 10.0**e:.3g}"
        out.append(_power(mantissa, e))
    return out


def wrap(title: str, width: float) -> list[str]:
    """``title`` in lines that fit ``width`` px (at :data:`TITLE_CHAR` a character), broken at spaces."""
    most = max(12, int(width / TITLE_CHAR))
    lines: list[str] = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= most:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


class Axis:
    """The transform of one axis: data value → px (``lo`` at ``p0``, ``hi`` at ``p1``)."""

    def __init__(self, lo: float, hi: float, log: bool, p0: float, p1: float) -> None:
        self.lo, self.hi, self.log, self.p0, self.p1 = lo, hi, log, p0, p1

    def __call__(self, v: float) -> float:
        a, b = _t(self.lo, self.log), _t(self.hi, self.log)
        return self.p0 + (self.p1 - self.p0) * (_t(v, self.log) - a) / (b - a)

    def attr(self) -> str:
        return f"{full(self.lo)} {full(self.hi)} {'log' if self.log else 'lin'}"


def _pt(x: float, y: float) -> str:
    return f"{x:.1f},{y:.1f}"


def _runs(points: list[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """Consecutive drawable points (a NaN or inf breaks the line, as matplotlib does)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for p in points:
        if p is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append(p)
    return [r for r in runs if r]


def line_chart(chart: Chart, chart_id: str) -> str:
    """The chart as one ``<figure>`` holding an inline ``<svg>``."""
    left, top, bottom, right = MARGIN
    items = (chart.items if chart.items is not None else _legend_items(chart)) if chart.legend else []
    per_row = legend_per_row(items, chart.width - left - right)
    legend_rows = math.ceil(len(items) / per_row) if items else 0
    titles = wrap(chart.title, chart.width - 16)
    top += TITLE_PX * (len(titles) - 1)  # room for a wrapped title's further lines
    width = chart.width
    height = chart.height + TITLE_PX * (len(titles) - 1) + LEGEND_ROW * legend_rows + 4
    pw, ph = width - left - right, chart.height - MARGIN[1] - bottom
    xs = [v for s in chart.series for v in s.x] + [r.value for r in chart.refs if r.axis == "x"]
    ys = [v for s in chart.series for v in s.y]
    ys += [v for s in chart.series if s.band for b in s.band for v in b]
    ys += [r.value for r in chart.refs if r.axis == "y"]
    finite_y = [v for v in ys if _ok(v, chart.log_y)]
    top_y = max(finite_y, default=1.0)
    fitted = top_y * 10.0 if chart.log_y else top_y + abs(top_y) * 0.1 + 0.1
    inf_level = fitted if chart.inf_level is None else chart.inf_level
    has_inf = any(math.isinf(v) and v > 0 for v in ys)
    ylo, yhi = chart.y_range or _domain(finite_y + ([inf_level] if has_inf else []), chart.log_y)
    xlo, xhi = chart.x_range or _domain(xs, chart.log_x)
    if not chart.log_x and not chart.x_range:
        ok = [v for v in xs if math.isfinite(v)]
        xlo, xhi = (min(ok), max(ok)) if ok and min(ok) < max(ok) else (xlo, xhi)
    if not chart.x_range:
        xlo, xhi = _edge_room(xlo, xhi, chart.log_x, [r.value for r in chart.refs if r.axis == "x"])
    ax = Axis(xlo, xhi, chart.log_x, left, left + pw)
    ay = Axis(ylo, yhi, chart.log_y, top + ph, top)
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(shown(chart.title))}" class="chart" '
        f'id="{escape(chart_id)}" '
        f'data-plot="{left} {top} {pw} {ph}" data-x="{ax.attr()}" data-y="{ay.attr()}">',
        f"<title>{escape(shown(chart.title))}</title>",
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plotbg"/>',
    ]
    y_ticks = _ticks(ylo, yhi, chart.log_y)
    for v, label in zip(y_ticks, tick_labels(y_ticks, chart.log_y), strict=True):
        py = ay(v)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py:.2f}" y2="{py:.2f}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{py + 5:.2f}" class="tick" text-anchor="end">{label}</text>')
    x_ticks = [v for v in chart.x_ticks if xlo <= v <= xhi] or _ticks(xlo, xhi, chart.log_x, chart.integer_x)
    for v, label in zip(x_ticks, tick_labels(x_ticks, chart.log_x), strict=True):
        px = ax(v)
        out.append(f'<line x1="{px:.2f}" x2="{px:.2f}" y1="{top}" y2="{top + ph}" class="grid"/>')
        out.append(f'<text x="{px:.2f}" y="{top + ph + 19}" class="tick" text-anchor="middle">{label}</text>')
    out.append(
        f'<svg x="{left}" y="{top}" width="{pw}" height="{ph}" viewBox="{left} {top} {pw} {ph}" '
        'overflow="hidden" class="clip">'
    )
    for s in chart.series:
        out.append(_series(s, ax, ay, chart, inf_level))
    for r in sorted(chart.refs, key=lambda r: DRAW_ORDER.get(r.dash, 0)):  # the sparser dashes on top
        out.append(_ref(r, ax, ay, chart, inf_level, left, top, pw, ph))
    out.append("</svg>")
    drawn = [run for s in chart.series for run in _runs(_points(s, ax, ay, chart))]
    out += [_ref_label(r, ax, left, top, pw, ph, drawn) for r in chart.refs if r.label and r.axis == "x"]
    out += _y_ref_labels([r for r in chart.refs if r.label and r.axis == "y"], ay, inf_level, left, top, pw)
    out.append(
        f'<text x="{left + pw / 2:.1f}" y="{top + ph + 42}" class="label" text-anchor="middle">'
        f"{svg_text(chart.xlabel)}</text>"
    )
    out.append(
        f'<text transform="translate(20 {top + ph / 2:.1f}) rotate(-90)" class="label" '
        f'text-anchor="middle">{svg_text(chart.ylabel)}</text>'
    )
    lines = "".join(
        f'<tspan x="8" dy="{0 if i == 0 else TITLE_PX}">{svg_text(line)}</tspan>'
        for i, line in enumerate(titles)
    )
    first = top - 12 - TITLE_PX * (len(titles) - 1)
    out.append(f'<text x="8" y="{first}" class="ctitle">{lines}</text>')
    if chart.legend:
        out.append(legend(items, per_row, left, chart.height + TITLE_PX * (len(titles) - 1) + 10, pw))
    if chart.depth is not None:
        out.append(depth_bar(chart.depth, left + pw, top, ph))
    out.append("</svg>")
    return f'<figure class="fig">{"".join(out)}</figure>'


def _series(s: Series, ax: Axis, ay: Axis, chart: Chart, inf_level: float) -> str:
    group = f' data-group="{escape(s.group)}"' if s.group else ""
    parts = [f'<g class="series"{group} data-name="{escape(shown(s.name))}">']
    if s.band is not None:
        lo, hi = s.band
        ok = [
            i
            for i in range(len(s.x))
            if _ok(lo[i], chart.log_y) and _ok(hi[i], chart.log_y) and _ok(s.x[i], chart.log_x)
        ]
        band_name = escape(shown(s.band_name or f"{s.name}: p10–p90"))
        for indices in _index_runs(ok):
            upper = [_pt(ax(s.x[i]), ay(hi[i])) for i in indices]
            lower = [_pt(ax(s.x[i]), ay(lo[i])) for i in reversed(indices)]
            parts.append(
                f'<polygon class="band" points="{" ".join(upper + lower)}" fill="{s.color}" '
                f'fill-opacity="{s.band_opacity}"><title>{band_name}</title></polygon>'
            )
    pts = _points(s, ax, ay, chart)
    dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
    data = ""
    if s.values:
        ys_attr = " ".join(full(v) if not math.isnan(v) else "NaN" for v in s.y)
        counting = list(s.x) == [float(i) for i in range(1, len(s.x) + 1)]
        xs_attr = "" if counting else ' data-xs="' + " ".join(full(v) for v in s.x) + '"'
        data = f'{xs_attr} data-ys="{ys_attr}"'
    for run in _runs(pts):
        parts.append(
            f'<polyline class="line" points="{" ".join(_pt(*p) for p in run)}" stroke="{s.color}" '
            f'stroke-width="{s.width}"{dash} fill="none"{data}>'
            f"<title>{escape(shown(s.name))}</title></polyline>"
        )
    if s.markers and len(s.y) <= MARKERS_MAX:
        for x, y, p in zip(s.x, s.y, pts, strict=False):
            if p is not None:
                tip = f"<title>{escape(shown(s.name))} at {num(x, 6)}: {full(y)}</title>"
                if s.marker == "square":  # hollow, round the dot of a series on the same values
                    parts.append(
                        f'<rect x="{p[0] - 5:.2f}" y="{p[1] - 5:.2f}" width="10" height="10" fill="none" '
                        f'stroke="{s.color}" stroke-width="1.5" data-value="{full(y)}">{tip}</rect>'
                    )
                    continue
                parts.append(
                    f'<circle cx="{p[0]:.2f}" cy="{p[1]:.2f}" r="3" fill="{s.color}" '
                    f'data-value="{full(y)}">{tip}</circle>'
                )
    for x, y in zip(s.x, s.y, strict=False):
        if math.isinf(y) and y > 0 and _ok(x, chart.log_x):
            px, py = ax(x), ay(inf_level)
            parts.append(
                f'<path class="inf" d="M{px - 5:.2f},{py + 4:.2f} L{px + 5:.2f},{py + 4:.2f} '
                f'L{px:.2f},{py - 5:.2f} Z" fill="{s.color}" data-value="Infinity">'
                f"<title>{escape(shown(s.name))} at {num(x, 6)}: inf</title></path>"
            )
    parts.append("</g>")
    return "".join(parts)


def _points(s: Series, ax: Axis, ay: Axis, chart: Chart) -> list[tuple[float, float] | None]:
    """Each value of ``s`` in px (None where an axis cannot show it)."""
    return [
        (ax(x), ay(y)) if _ok(x, chart.log_x) and _ok(y, chart.log_y) else None
        for x, y in zip(s.x, s.y, strict=False)
    ]


def _index_runs(ok: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in ok:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _ref(
    r: RefLine,
    ax: Axis,
    ay: Axis,
    chart: Chart,
    inf_level: float,
    left: float,
    top: float,
    pw: float,
    ph: float,
) -> str:
    log = chart.log_y if r.axis == "y" else chart.log_x
    v = inf_level if r.axis == "y" and math.isinf(r.value) and r.value > 0 else r.value
    if not _ok(v, log):
        return ""
    tip = f"<title>{escape(shown(r.name))}: {full(r.value)}</title>"
    if r.axis == "y":
        p = ay(v)
        return (
            f'<line class="ref" x1="{left}" x2="{left + pw}" y1="{p:.2f}" y2="{p:.2f}" stroke="{r.color}" '
            f'stroke-dasharray="{r.dash}" data-value="{full(r.value)}">{tip}</line>'
        )
    p = ax(v)
    return (
        f'<line class="ref" x1="{p:.2f}" x2="{p:.2f}" y1="{top}" y2="{top + ph}" stroke="{r.color}" '
        f'stroke-dasharray="{r.dash}" data-value="{full(r.value)}">{tip}</line>'
    )


REF_CHAR = 8.6  # px: the width of an average character of a reference line's name (14 px, semibold)


def crosses(box: tuple[float, float, float, float], line: list[tuple[float, float]]) -> bool:
    """Whether the polyline ``line`` (px) passes through ``box`` (x0, y0, x1, y1): tested at points 1 px
    apart along each segment."""
    x0, y0, x1, y1 = box
    if len(line) == 1:
        return x0 <= line[0][0] <= x1 and y0 <= line[0][1] <= y1
    for (ax_, ay_), (bx, by) in itertools.pairwise(line):
        steps = max(1, int(math.hypot(bx - ax_, by - ay_)))
        for i in range(steps + 1):
            x, y = ax_ + (bx - ax_) * i / steps, ay_ + (by - ay_) * i / steps
            if x0 <= x <= x1 and y0 <= y <= y1:
                return True
    return False


def ref_label_box(
    r: RefLine, ax: Axis, top: float, ph: float, at_top: bool, right: bool
) -> tuple[float, float, float, float]:
    """The box (x0, y0, x1, y1, px) a vertical line's name covers at the top or foot of the plot, right or
    left of the line."""
    p = ax(r.value)
    width = REF_CHAR * len(shown(r.name))
    x0 = p + 4 if right else p - 4 - width
    base = top + 15 if at_top else top + ph - 5
    return (x0, base - 14, x0 + width, base + 4)


def _ref_label(
    r: RefLine,
    ax: Axis,
    left: float,
    top: float,
    pw: float,
    ph: float,
    drawn: list[list[tuple[float, float]]] | None = None,
) -> str:
    """A vertical line's name inside the plot, on the side with more room, at the foot or the top: the
    first place where no curve passes (``drawn``: the curves' points in px; curves that saturate at the
    top, as rank-decay's c_j → 1, leave the foot free); at the foot where every place is crossed."""
    if not _ok(r.value, ax.log):
        return ""
    p = ax(r.value)
    right = p < left + pw / 2
    line = drawn or []
    places = [(t, side) for t in (False, True) for side in (right, not right)]  # the foot first, as the PNG
    free = [
        (t, side)
        for t, side in places
        if not any(crosses(ref_label_box(r, ax, top, ph, t, side), run) for run in line)
    ]
    at_top, right = (free or places)[0]
    x = p + 4 if right else p - 4
    y = top + 15 if at_top else top + ph - 5
    return (
        f'<text x="{x:.2f}" y="{y:.2f}" class="reflabel" fill="{r.color}" '
        f'text-anchor="{"start" if right else "end"}">{svg_text(r.name)}</text>'
    )


LABEL_PX = 17  # px: two names of horizontal lines closer than this would overlap
DRAW_ORDER = {"": 0, "none": 0, "6 4": 1, "8 3 2 3": 2, "2 3": 3}  # by dash: solid first, dotted last


def _y_ref_labels(
    refs: list[RefLine], ay: Axis, inf_level: float, left: float, top: float, pw: float
) -> list[str]:
    """The names of horizontal lines at the plot's right end: above each line, or below it where the name
    of a line close above (or the plot's top) leaves no room, so that lines at nearly the same value (the
    target κ = 2 and κ(X + C) = 1.97) both stay named and visible."""
    placed = []
    for r in refs:
        v = inf_level if math.isinf(r.value) and r.value > 0 else r.value
        if _ok(v, ay.log):
            placed.append((ay(v), r))
    out = []
    ceiling = top + LABEL_PX  # the lowest baseline a name above a line may not go over
    for p, r in sorted(placed, key=lambda t: t[0]):  # from the top of the plot down
        above = p - 4 >= ceiling
        y = p - 4 if above else p + 15
        out.append(
            f'<text x="{left + pw - 4:.2f}" y="{y:.2f}" class="reflabel" fill="{r.color}" '
            f'text-anchor="end" data-value="{full(r.value)}">{svg_text(r.name)}</text>'
        )
        ceiling = y + LABEL_PX
    return out


def _legend_items(chart: Chart) -> list[Item]:
    items: list[Item] = []
    for s in chart.series:
        if s.band is not None and chart.band_legend:
            items.append((s.band_name or f"{s.name}: p10–p90", s.color, "", s.group, "band"))
        items.append((s.name, s.color, s.dash, s.group, "line"))
    items += [(r.name, r.color, r.dash, "", "ref") for r in chart.refs]
    return items


__all__ = [
    "MAGMA",
    "VIRIDIS",
    "Chart",
    "DepthBar",
    "RefLine",
    "Series",
    "color_at",
    "heatmap",
    "line_chart",
]
