"""Drawing a :class:`condcli.figures.Figure` with matplotlib: every panel's series, bands, inf markers,
reference lines, scales and legend as the description gives them (the page draws the same description).

Text is set as mathtext (:func:`condcli.figures.labels.mathtext`: "κ(X_l)" → $\\kappa(X_\\ell)$), colours are
the Okabe–Ito roles and the yellow-free part of viridis (:mod:`condcli.figures.palette`), and a log axis
labels its decades, or up to 2.7 decades 1, 2, 5 of each (:func:`_log_ticks`), each axis in one tick
format. ``title``: the figure's and panels' titles (off: panels tagged (a), (b), … for a caption);
``style``: see :mod:`.style`."""

from __future__ import annotations

import math
from typing import Any, cast

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis as MplAxis
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogFormatterSciNotation,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    ScalarFormatter,
)
from matplotlib.transforms import offset_copy

from condcli.figures import ANNOTATE_MAX, INF_ENTRY, DepthBar, Heatmap, Panel, depth_of
from condcli.figures import Figure as Description
from condcli.figures.labels import mathtext
from condcli.figures.palette import ROLE_COLORS
from condcli.numbers import num
from condcli.plots.style import PAPER_PANEL_HEIGHT, PAPER_WIDTH, Look, look

PALETTE = ROLE_COLORS
DASH = {"solid": "-", "dashed": "--", "dashdot": "-.", "dotted": ":"}
INF_MARKER = "^"
DEPTH_CMAP = "viridis"
HEAT_CMAP = "magma"
LONG_TITLE = 45  # a panel title longer than this is set a size smaller
# draw order: bands under lines, lines under reference lines, the sparser dashes on top (a dotted target
# on a dash-dotted κ(X + C) at nearly the same value stays visible)
Z_BAND, Z_LINE, Z_REF = 1.0, 2.0, {"solid": 2.5, "dashed": 2.6, "dashdot": 2.7, "dotted": 2.8}
TAGS = "abcdefghijklmnopqrstuvwxyz"
FEW_DECADES = 2.7  # a log axis spanning up to this many decades is labelled at 1, 2 and 5 of each


def color(name: str) -> Any:
    """A description's colour as matplotlib's: a role from :data:`PALETTE`, a depth from viridis."""
    t = depth_of(name)
    return mpl.colormaps[DEPTH_CMAP](t) if t is not None else PALETTE.get(name, name)


def _array(values: Any) -> np.ndarray:
    return np.asarray(list(values), dtype=np.float64)


def _shown(y: np.ndarray, log: bool) -> np.ndarray:
    """``y`` with every value its axis cannot show (±inf, NaN, ≤ 0 on a log axis) replaced by NaN."""
    return np.where(np.isfinite(y) & ((y > 0) | (not log)), y, np.nan)


def _series(ax: Axes, p: Panel, level: float, handles: dict[str, Any], lk: Look) -> None:
    for s in p.drawn():
        c = color(s.color)
        x, y = _array(s.x), _array(s.y)
        if s.band is not None and p.band_drawn(s):
            lo, hi = _shown(_array(s.band.lo), p.y.log), _shown(_array(s.band.hi), p.y.log)
            ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(_shown(x, p.x.log))
            band = ax.fill_between(
                x,
                lo,
                hi,
                where=ok,
                color=c,
                alpha=s.band.alpha,
                linewidth=0,
                zorder=Z_BAND,
                label=s.band.name or None,
            )
            handles[s.band.name] = band
        width = s.width * lk.width
        style: dict[str, Any] = {"color": c, "linestyle": DASH[s.dash], "linewidth": width}
        style["zorder"] = Z_LINE
        if s.markers:  # a hollow square is drawn larger, round the dot of a series it coincides with
            square = s.marker == "square"
            size = (2 * width + 1) * (1.9 if square else 1.0)
            style.update(marker="s" if square else "o", markersize=size)
            if square:
                style.update(markerfacecolor="none", markeredgewidth=max(0.8, 0.6 * width))
        if p.points(s):
            (handles[s.name],) = ax.plot(x, _shown(y, p.y.log), label=s.name, **style)
        inf = p.infs(s)
        if inf:
            (handles[s.name + INF_ENTRY],) = ax.plot(
                x[inf],
                np.full(len(inf), level),
                linestyle="none",
                marker=INF_MARKER,
                markersize=8 * lk.width,
                color=c,
                label=s.name + INF_ENTRY,
            )


def _refs(ax: Axes, p: Panel, level: float, handles: dict[str, Any], lk: Look) -> None:
    for r in p.refs_drawn():
        ref = {"color": color(r.color), "linestyle": DASH[r.dash], "zorder": Z_REF[r.dash], "label": r.name}
        ref["linewidth"] = 1.3 * lk.width
        if r.axis == "y":
            handles[r.name] = ax.axhline(level if math.isinf(r.value) else r.value, **ref)
        else:
            handles[r.name] = ax.axvline(r.value, **ref)


def _fraction(value: float, lim: tuple[float, float], log: bool) -> float:
    a, b = lim
    if log:
        return math.log10(value / a) / math.log10(b / a)
    return (value - a) / (b - a)


def _annotations(ax: Axes, p: Panel, level: float, lk: Look) -> None:
    """The names of the annotated reference lines, in the plot: a vertical one's at its foot on the side
    with more room; a horizontal one's at the right end above it, or below it near the top or where the
    name of a line close above would otherwise cover it (not in the paper style, whose panels are too
    small: its legend names them, and the draw order keeps each line visible)."""
    size = lk.note
    for r in p.refs_drawn():
        if r.annotate and r.axis == "x":
            right = _fraction(r.value, ax.get_xlim(), p.x.log) < 0.5
            ax.annotate(
                mathtext(r.name),
                xy=(r.value, 0.0),
                xycoords=("data", "axes fraction"),
                xytext=(3 if right else -3, 4),
                textcoords="offset points",
                fontsize=size,
                color=color(r.color),
                ha="left" if right else "right",
            )
    if not lk.y_notes:
        return
    ys = sorted(
        (
            (_fraction(level if math.isinf(r.value) else r.value, ax.get_ylim(), p.y.log), r)
            for r in p.refs_drawn()
            if r.annotate and r.axis == "y"
        ),
        key=lambda t: t[0],
    )
    above_taken = 0.93  # a name above a line this high would leave the plot
    for t, r in reversed(ys):  # from the top: a name goes above its line unless the one above is too close
        below = above_taken - t < 0.07
        ax.annotate(
            mathtext(r.name),
            xy=(1.0, t),
            xycoords="axes fraction",
            xytext=(-3, -3 if below else 3),
            textcoords="offset points",
            fontsize=size,
            color=color(r.color),
            ha="right",
            va="top" if below else "bottom",
        )
        above_taken = t


def _log_ticks(axis: MplAxis, lim: tuple[float, float], room: float) -> None:
    """Where a log axis spans at most :data:`FEW_DECADES`, labels between the decades as plain numbers, so
    that a value can be read off it: 1, 2 and 5 of each decade, or 1 and 3 where those would not fit the
    ``room`` labels the axis has (a paper's panel); else the decades as 10^n. Minor ticks are never
    labelled."""
    lo, hi = sorted(lim)
    decades = math.log10(hi / lo) if lo > 0 else math.inf
    subs = next((s for s in ((1.0, 2.0, 5.0), (1.0, 3.0)) if len(s) * decades <= room), None)
    if decades > FEW_DECADES or subs is None:
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(LogFormatterSciNotation(base=10))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        plain = lo >= 1e-3 and hi < 1e4  # one format for the whole axis
        axis.set_major_formatter(FuncFormatter(lambda v, _: log_tick(v, plain)))
    axis.set_minor_formatter(NullFormatter())


def log_tick(v: float, plain: bool) -> str:
    """A label between decades: a plain number ("0.02", "500") on an axis within 0.001–9999 (``plain``),
    else m×10^e in mathtext ("$2{\\times}10^{4}$", "$10^{3}$"), never "2e+04"."""
    if v <= 0 or plain:
        return f"{v:g}"  # the ticks are 1, 2, 3 or 5 of a decade: exact in 4 digits
    e = math.floor(math.log10(v) + 1e-9)
    m = num(v / 10.0**e, 3)
    return "$" + ("" if m == "1" else m + r"{\times}") + "10^{" + str(e) + "}$"


def _room(ax: Axes, axis: MplAxis) -> float:
    """How many tick labels fit along ``axis``: its length over two and a half font heights (vertical) or
    six (horizontal, where labels are wider than tall)."""
    fig = ax.get_figure(root=True)
    assert isinstance(fig, Figure)
    box = ax.get_position()
    width, height = fig.get_size_inches()
    size = mpl.rcParams["ytick.labelsize"]
    points = float(size if isinstance(size, (int, float)) else mpl.rcParams["font.size"])
    if axis is ax.yaxis:
        return float(box.height * height * 72 / (2.5 * points))
    return float(box.width * width * 72 / (6 * points))


def _axes(ax: Axes, p: Panel) -> None:
    for axis, spec, scale, lim, get in (
        (ax.xaxis, p.x, ax.set_xscale, ax.set_xlim, ax.get_xlim),
        (ax.yaxis, p.y, ax.set_yscale, ax.set_ylim, ax.get_ylim),
    ):
        if spec.log:
            scale("log")
        if spec.range is not None:
            lim(*spec.range)
        if spec.ticks:  # the description's: plain numbers ("1, 2, 3, 5, 10" on a rank axis)
            axis.set_major_locator(FixedLocator(list(spec.ticks)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: num(v, 6)))
            axis.set_minor_formatter(NullFormatter())
        elif spec.log:
            _log_ticks(axis, get(), _room(ax, axis))
        else:
            formatter = ScalarFormatter(useMathText=True)
            formatter.set_powerlimits((-3, 4))
            axis.set_major_formatter(formatter)
        if spec.integer and not spec.ticks:
            axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(mathtext(p.x.label))
    ax.set_ylabel(mathtext(p.y.label))
    ax.grid(True, which="major", alpha=0.3)


def _columns(entries: list[str], lk: Look) -> int:
    return 2 if len(entries) > 1 and max(len(e) for e in entries) <= lk.two_columns else 1


def legend_rows(panel: Panel | Heatmap, lk: Look) -> int:
    """How many rows the panel's legend takes under it (0: none, or one drawn on the panel)."""
    entries = panel.legend_entries() if isinstance(panel, Panel) else []
    if len(entries) <= lk.legend_below or not entries:
        return 0
    return math.ceil(len(entries) / _columns(entries, lk))


def shared_legend(desc: Description) -> list[str]:
    """The legend every line panel of a figure of several has alike (the layers and m of both forwards of
    rank-decay): drawn once, under the figure, not once a panel. Empty where the panels' legends differ."""
    lines = [p for p in desc.panels if isinstance(p, Panel)]
    if len(lines) < 2 or len(lines) != len(desc.panels):
        return []
    first = [(e.name, e.color, e.dash, e.kind) for e in lines[0].legend()]
    same = all([(e.name, e.color, e.dash, e.kind) for e in p.legend()] == first for p in lines[1:])
    return lines[0].legend_entries() if same else []


def shared_columns(entries: list[str], lk: Look, width: float) -> int:
    """The columns of the shared legend: as many entries a row as fit ``width`` inches (8–9 pt type: about
    half a point a character, and the line sample), the rows then filled evenly."""
    size = lk.legend if isinstance(lk.legend, (int, float)) else 9.0
    entry = (max(len(e) for e in entries) + 5) * size * 0.55 / 72
    fit = max(1, min(len(entries), int(width / entry)))
    rows = math.ceil(len(entries) / fit)
    return math.ceil(len(entries) / rows)


def _legend(ax: Axes, p: Panel, handles: dict[str, Any], lk: Look) -> None:
    entries = p.legend_entries()
    if not entries:
        return
    labels = [mathtext(e) for e in entries]
    shown = [handles[e] for e in entries]
    if len(entries) > lk.legend_below:  # under the panel's x label, where it covers nothing
        root = ax.get_figure(root=True)
        assert isinstance(root, Figure)
        below = offset_copy(ax.transAxes, fig=root, y=-lk.under_axis, units="inches")
        ax.legend(
            shown,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            bbox_transform=below,
            fontsize=lk.legend,
            ncols=_columns(entries, lk),
        )
    else:
        ax.legend(shown, labels, loc="best", fontsize=lk.legend)


def _panel(ax: Axes, p: Panel, lk: Look, title: bool, own_legend: bool = True) -> dict[str, Any]:
    """Draw one line panel; returns its legend's handles by entry (its legend drawn on it: ``own_legend``)."""
    level = p.inf_level()
    handles: dict[str, Any] = {}
    _series(ax, p, level, handles, lk)
    _refs(ax, p, level, handles, lk)
    _axes(ax, p)
    _annotations(ax, p, level, lk)
    if title:
        text = p.title
        if lk.title_chars and len(text) > lk.title_chars and ": " in text:  # too wide for the column
            text = text.replace(": ", ":\n", 1)
        ax.set_title(mathtext(text), fontsize="medium" if len(p.title) > LONG_TITLE else None)
    if own_legend:
        _legend(ax, p, handles, lk)
    if not p.drawn() and p.missing:
        ax.text(0.5, 0.5, mathtext(p.missing), ha="center", va="center", transform=ax.transAxes)
    return handles


def _depth_bar(fig: Figure, axes: list[Axes], bar: DepthBar) -> None:
    cmap = ListedColormap(mpl.colormaps[DEPTH_CMAP](np.linspace(*bar.span, 256)))
    mappable = ScalarMappable(norm=Normalize(vmin=bar.lo, vmax=bar.hi), cmap=cmap)
    colorbar = fig.colorbar(mappable, ax=axes, label=mathtext(bar.label))
    colorbar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _heatmap(ax: Axes, h: Heatmap, lk: Look, title: bool) -> Any:
    table = np.array([list(row) for row in h.values], dtype=np.float64).reshape(len(h.values), -1)
    ok = table[np.isfinite(table) & ((table > 0) | (not h.log))]
    lo, hi = h.vrange or ((float(ok.min()), float(ok.max())) if ok.size else (1.0, 10.0))
    norm: Normalize = LogNorm(vmin=lo, vmax=hi) if h.log else Normalize(vmin=lo, vmax=hi)
    image = ax.imshow(np.ma.masked_invalid(table), cmap=mpl.colormaps[HEAT_CMAP], norm=norm, aspect="auto")
    ax.set_xlabel(mathtext(h.xlabel))
    ax.set_ylabel(mathtext(h.ylabel))
    ax.set_yticks(range(len(h.rows)), list(h.rows))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if title:
        ax.set_title(mathtext(h.title), fontsize="medium")
    if ok.size <= ANNOTATE_MAX:
        for (i, j), v in np.ndenumerate(table):
            if np.isfinite(v) and (v > 0 or not h.log):
                text = num(v, h.digits) if h.log else f"{v:.{h.digits}f}"
                dark = norm(v) < 0.5
                ax.text(j, i, text, ha="center", va="center", fontsize=lk.cell, color="w" if dark else "k")
    return image


def layout(desc: Description, style: str) -> tuple[tuple[float, float], tuple[int, int]]:
    """The figure's size in inches and its grid of panels: the description's, or for ``"paper"`` one column
    :data:`PAPER_WIDTH` wide with the panels stacked; taller by the rows of the legends under panels."""
    lk = look(style)
    shared = shared_legend(desc)
    if style == "paper":
        n = max(1, len(desc.panels))
        if shared:
            rows = math.ceil(len(shared) / shared_columns(shared, lk, PAPER_WIDTH))
        else:
            rows = sum(legend_rows(p, lk) for p in desc.panels)
        return (PAPER_WIDTH, PAPER_PANEL_HEIGHT * n + 0.3 + lk.row * rows), (n, 1)
    grid_rows, cols = desc.grid
    width, height = desc.size
    if shared:
        rows = math.ceil(len(shared) / shared_columns(shared, lk, width))
        return (width, height + lk.row * rows + 0.1), desc.grid
    extra = sum(
        max((legend_rows(p, lk) for p in desc.panels[r * cols : (r + 1) * cols]), default=0)
        for r in range(grid_rows)
    )
    return (width, height + lk.row * extra + (0.3 if extra else 0.0)), desc.grid


def render(desc: Description, title: bool = True, style: str = "default") -> Figure:
    """The description as a matplotlib Figure (never through pyplot: nothing global is created or left open).
    A figure of one panel whose title begins with the panel's title shows it once, as the panel's title.
    ``title=False``: no titles (the panels of a figure of several are tagged (a), (b), …); ``style``:
    ``"default"`` or ``"paper"`` (:mod:`condcli.plots.style`)."""
    lk = look(style)
    size, (rows, cols) = layout(desc, style)
    with mpl.rc_context(cast(Any, lk.rc)):
        fig = Figure(figsize=size, layout="constrained")
        axes = list(fig.subplots(rows, cols, squeeze=False, sharey=desc.share_y).ravel())
        bars: dict[DepthBar, list[Axes]] = {}
        heat: list[tuple[Axes, Any, Heatmap]] = []
        shared = shared_legend(desc)
        handles: dict[str, Any] = {}
        for ax, panel in zip(axes, desc.panels, strict=False):
            if isinstance(panel, Heatmap):
                heat.append((ax, _heatmap(ax, panel, lk, title), panel))
                continue
            drawn = _panel(ax, panel, lk, title, own_legend=not shared)
            handles = handles or drawn  # the first panel's: the shared legend's samples
            if panel.depth is not None and not panel.legend_shown and panel.drawn():
                bars.setdefault(panel.depth, []).append(ax)
        if desc.share_y and cols > 1:
            for ax in axes[1:]:
                ax.set_ylabel("")
        for bar, where in bars.items():
            _depth_bar(fig, where, bar)
        if shared:
            fig.legend(
                [handles[e] for e in shared],
                [mathtext(e) for e in shared],
                loc="outside lower center",
                fontsize=lk.legend,
                ncols=shared_columns(shared, lk, size[0]),
            )
        scales = {h.vrange for _, _, h in heat}
        if len(heat) > 1 and len(scales) == 1 and None not in scales:  # one scale for every panel: one bar
            fig.colorbar(heat[-1][1], ax=[a for a, _, _ in heat], label=mathtext(heat[0][2].bar_label))
        else:  # each panel on its own scale (rank-decay's c_m): each its own bar
            for ax, image, h in heat:
                fig.colorbar(image, ax=ax, label=mathtext(h.bar_label))
        first = desc.panels[0] if desc.panels else None
        if not title:
            if len(desc.panels) > 1:
                for tag, ax in zip(TAGS, axes, strict=False):
                    ax.set_title(f"({tag})", loc="left", fontweight="bold", fontsize="medium")
        elif len(desc.panels) == 1 and first is not None and desc.title.split("\n")[0] == first.title:
            axes[0].set_title(mathtext(desc.title))
        else:
            fig.suptitle(mathtext(desc.title))
        fig.draw_without_rendering()  # the ticks are made now, in the style's sizes and fonts
    return fig
