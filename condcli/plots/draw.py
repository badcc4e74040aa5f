"""Drawing a :class:`condcli.figures.Figure` with matplotlib: every panel's series, bands, inf markers,
reference lines, scales and legend as the description gives them (the page draws the same description)."""

from __future__ import annotations

import math
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from condcli.figures import ANNOTATE_MAX, INF_ENTRY, DepthBar, Heatmap, Panel, depth_of
from condcli.figures import Figure as Description
from condcli.numbers import num

PALETTE = {
    "plain": "red",
    "conditioned": "green",
    "bound": "black",
    "corrected": "tab:blue",
    "target": "gray",
    "recommended": "purple",
    "index": "gray",
}
DASH = {"solid": "-", "dashed": "--", "dashdot": "-.", "dotted": ":"}
INF_MARKER = "^"
DEPTH_CMAP = "viridis"
HEAT_CMAP = "magma"
LONG_TITLE = 45  # a panel title longer than this is set a size smaller


def color(name: str) -> Any:
    """A description's colour as matplotlib's: a role from :data:`PALETTE`, a depth from viridis."""
    t = depth_of(name)
    return mpl.colormaps[DEPTH_CMAP](t) if t is not None else PALETTE.get(name, name)


def _array(values: Any) -> np.ndarray:
    return np.asarray(list(values), dtype=np.float64)


def _shown(y: np.ndarray, log: bool) -> np.ndarray:
    """``y`` with every value its axis cannot show (±inf, NaN, ≤ 0 on a log axis) replaced by NaN."""
    return np.where(np.isfinite(y) & ((y > 0) | (not log)), y, np.nan)


def _panel(ax: Axes, p: Panel) -> None:
    level = p.inf_level()
    handles: dict[str, Any] = {}
    for s in p.drawn():
        c = color(s.color)
        x, y = _array(s.x), _array(s.y)
        if s.band is not None and p.band_drawn(s):
            lo, hi = _shown(_array(s.band.lo), p.y.log), _shown(_array(s.band.hi), p.y.log)
            ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(_shown(x, p.x.log))
            band = ax.fill_between(
                x, lo, hi, where=ok, color=c, alpha=s.band.alpha, linewidth=0, label=s.band.name or None
            )
            handles[s.band.name] = band
        style: dict[str, Any] = {"color": c, "linestyle": DASH[s.dash], "linewidth": s.width}
        if s.markers:
            style.update(marker="o", markersize=2 * s.width + 1)
        if p.points(s):
            (handles[s.name],) = ax.plot(x, _shown(y, p.y.log), label=s.name, **style)
        inf = p.infs(s)
        if inf:
            name = s.name + INF_ENTRY
            (handles[name],) = ax.plot(
                x[inf],
                np.full(len(inf), level),
                linestyle="none",
                marker=INF_MARKER,
                markersize=8,
                color=c,
                label=name,
            )
    for r in p.refs_drawn():
        ref = {"color": color(r.color), "linestyle": DASH[r.dash], "label": r.name}
        if r.axis == "y":
            handles[r.name] = ax.axhline(level if math.isinf(r.value) else r.value, **ref)
        else:
            handles[r.name] = ax.axvline(r.value, **ref)
    _axes(ax, p)
    for r in p.refs_drawn():
        if r.annotate and r.axis == "x":
            a, b = ax.get_xlim()
            t = math.log10(r.value / a) / math.log10(b / a) if p.x.log else (r.value - a) / (b - a)
            right = t < 0.5  # the name on the side with more room
            ax.annotate(
                r.name,
                xy=(r.value, 0.0),
                xycoords=("data", "axes fraction"),
                xytext=(3 if right else -3, 4),
                textcoords="offset points",
                fontsize="small",
                color=color(r.color),
                ha="left" if right else "right",
            )
    entries = p.legend_entries()
    if entries:
        ax.legend([handles[e] for e in entries], entries, loc="best", fontsize="small")
    if not p.drawn() and p.missing:
        ax.text(0.5, 0.5, p.missing, ha="center", va="center", transform=ax.transAxes)


def _axes(ax: Axes, p: Panel) -> None:
    for axis, spec, scale, lim in (
        (ax.xaxis, p.x, ax.set_xscale, ax.set_xlim),
        (ax.yaxis, p.y, ax.set_yscale, ax.set_ylim),
    ):
        if spec.log:
            scale("log")
        if spec.range is not None:
            lim(*spec.range)
        if spec.integer:
            axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(p.x.label)
    ax.set_ylabel(p.y.label)
    if len(p.title) > LONG_TITLE:
        ax.set_title(p.title, fontsize="medium")
    else:
        ax.set_title(p.title)
    ax.grid(True, which="major", alpha=0.3)


def _depth_bar(fig: Figure, axes: list[Axes], bar: DepthBar) -> None:
    cmap = ListedColormap(mpl.colormaps[DEPTH_CMAP](np.linspace(*bar.span, 256)))
    mappable = ScalarMappable(norm=Normalize(vmin=bar.lo, vmax=bar.hi), cmap=cmap)
    colorbar = fig.colorbar(mappable, ax=axes, label=bar.label)
    colorbar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _heatmap(ax: Axes, h: Heatmap) -> Any:
    table = np.array([list(row) for row in h.values], dtype=np.float64).reshape(len(h.values), -1)
    ok = table[np.isfinite(table) & ((table > 0) | (not h.log))]
    lo, hi = h.vrange or ((float(ok.min()), float(ok.max())) if ok.size else (1.0, 10.0))
    norm: Normalize = LogNorm(vmin=lo, vmax=hi) if h.log else Normalize(vmin=lo, vmax=hi)
    image = ax.imshow(np.ma.masked_invalid(table), cmap=mpl.colormaps[HEAT_CMAP], norm=norm, aspect="auto")
    ax.set_xlabel(h.xlabel)
    ax.set_ylabel(h.ylabel)
    ax.set_yticks(range(len(h.rows)), list(h.rows))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(h.title, fontsize="medium")
    if ok.size <= ANNOTATE_MAX:
        for (i, j), v in np.ndenumerate(table):
            if np.isfinite(v) and (v > 0 or not h.log):
                text = num(v, h.digits) if h.log else f"{v:.{h.digits}f}"
                dark = norm(v) < 0.5
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color="w" if dark else "k")
    return image


def render(desc: Description) -> Figure:
    """The description as a matplotlib Figure (never through pyplot: nothing global is created or left open).
    A figure of one panel whose title begins with the panel's title shows it once, as the panel's title."""
    fig = Figure(figsize=desc.size, layout="constrained")
    rows, cols = desc.grid
    axes = list(fig.subplots(rows, cols, squeeze=False, sharey=desc.share_y).ravel())
    bars: dict[DepthBar, list[Axes]] = {}
    heat: list[tuple[Axes, Any, Heatmap]] = []
    for ax, panel in zip(axes, desc.panels, strict=False):
        if isinstance(panel, Heatmap):
            heat.append((ax, _heatmap(ax, panel), panel))
            continue
        _panel(ax, panel)
        if panel.depth is not None and not panel.legend_shown and panel.drawn():
            bars.setdefault(panel.depth, []).append(ax)
    if desc.share_y:
        for ax in axes[1:]:
            ax.set_ylabel("")
    for bar, where in bars.items():
        _depth_bar(fig, where, bar)
    if heat:
        fig.colorbar(heat[-1][1], ax=[a for a, _, _ in heat], label=heat[0][2].bar_label)
    first = desc.panels[0] if desc.panels else None
    if len(desc.panels) == 1 and first is not None and desc.title.split("\n")[0] == first.title:
        axes[0].set_title(desc.title)
    else:
        fig.suptitle(desc.title)
    return fig
