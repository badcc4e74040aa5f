"""What a figure shows, as plain data: its panels, their axes (scale, range, labels), series, p10–p90 bands,
reference lines and legend. :mod:`condcli.plots` draws a :class:`Figure` with matplotlib (PNG/SVG/PDF) and
:mod:`condcli.html` draws the same description as inline SVG, so the two cannot disagree on what is shown.

Colours are named by role (:data:`ROLES`, the Okabe–Ito colours of :mod:`.palette`, which both renderers
use) or by depth (:func:`depth`, a point of the viridis colormap below its yellow end); dashes by name
(:data:`Dash`). Text is Unicode as the tables print it ("κ(X_l)"); each renderer sets its scripts
(:mod:`.labels`). A value a log axis cannot
show (≤ 0, NaN) is not drawn; +inf is drawn as a '▲' marker one decade above the largest finite value of
its panel (:meth:`Panel.inf_level`). What the legend lists follows from that (:meth:`Panel.legend_entries`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from condcli.figures.palette import DEPTH_TOP

Scale = Literal["lin", "log"]
Dash = Literal["solid", "dashed", "dashdot", "dotted"]
Marker = Literal["circle", "square"]  # a filled dot, or a larger hollow square that shows a dot under it

# colour roles: the plain X (vermillion, the paper's red), the conditioned X + λ·I_k (bluish green, its
# green), and the reference lines' colours (condcli.figures.palette.ROLE_COLORS)
ROLES = ("plain", "conditioned", "bound", "corrected", "target", "recommended", "index")
BAND_ALPHA = 0.2  # the opacity of a p10–p90 band
LEGEND_MAX = 6  # a panel coloured by depth lists at most this many series; with more, a depth colour bar
INF_ENTRY = ": inf"  # the legend entry of a series' infinite values: "<name>: inf"


def depth(t: float, span: tuple[float, float] = (0.0, DEPTH_TOP)) -> str:
    """The colour of depth ``t`` in [0, 1]: viridis at ``span[0] + t·(span[1] − span[0])`` (by default up to
    :data:`~condcli.figures.palette.DEPTH_TOP`, below viridis' yellow)."""
    lo, hi = span
    return f"viridis:{lo + (hi - lo) * min(1.0, max(0.0, t))!r}"


def depth_of(color: str) -> float | None:
    """Where on viridis a :func:`depth` colour lies; None for a role."""
    return float(color.partition(":")[2]) if color.startswith("viridis:") else None


@dataclass(frozen=True)
class Axis:
    """One axis: its label, lin or log scale, a fixed range (else it fits the data), whether its ticks
    are integers only (layer indices, training steps) and ``ticks``: where to label it, as plain numbers
    (empty: the renderer's choice), e.g. 1, 2, 3, 5, 10, 20 on a log index axis, where a rank reads off."""

    label: str
    scale: Scale = "lin"
    range: tuple[float, float] | None = None
    integer: bool = False
    ticks: tuple[float, ...] = ()

    @property
    def log(self) -> bool:
        return self.scale == "log"


@dataclass(frozen=True)
class Band:
    """A translucent area between ``lo`` and ``hi`` (p10–p90); ``name`` its legend entry ("" for none)."""

    lo: Sequence[float]
    hi: Sequence[float]
    name: str = ""
    alpha: float = BAND_ALPHA


@dataclass(frozen=True)
class Series:
    """One curve. ``y`` may hold NaN (not drawn) and +inf (a marker at the panel's inf level); ``group`` is
    the class the page's toggles show or hide; ``hover`` whether the page carries its values for the JS
    hover; ``width`` in points; ``marker`` the shape of its markers (a square round a dot keeps two series
    that coincide both visible)."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    color: str
    dash: Dash = "solid"
    markers: bool = False
    marker: Marker = "circle"
    width: float = 1.5
    band: Band | None = None
    group: str = ""
    hover: bool = True


@dataclass(frozen=True)
class Ref:
    """A horizontal (``axis="y"``) or vertical (``axis="x"``) reference line at ``value``, listed in the
    legend as ``name``; with ``annotate`` its name is also written beside it in the plot."""

    value: float
    name: str
    color: str
    axis: Literal["x", "y"] = "y"
    dash: Dash = "dashed"
    annotate: bool = False


@dataclass(frozen=True)
class DepthBar:
    """The colour bar of a panel whose series are coloured by depth: indices ``lo``…``hi`` over ``span`` of
    viridis."""

    lo: float
    hi: float
    label: str
    span: tuple[float, float] = (0.0, DEPTH_TOP)


def _ok(v: float, log: bool) -> bool:
    return math.isfinite(v) and (v > 0 or not log)


@dataclass(frozen=True)
class Panel:
    """A line chart. ``legend_shown``: whether a legend lists its series (else ``depth`` gives a colour bar);
    ``missing``: what stands in its place when it draws nothing."""

    title: str
    x: Axis
    y: Axis
    series: Sequence[Series]
    refs: Sequence[Ref] = ()
    legend_shown: bool = True
    depth: DepthBar | None = None
    missing: str = ""

    def points(self, s: Series) -> list[int]:
        """The indices of ``s`` drawn as a point of its line (both coordinates on their axes)."""
        return [
            i
            for i, (x, y) in enumerate(zip(s.x, s.y, strict=False))
            if _ok(x, self.x.log) and _ok(y, self.y.log)
        ]

    def infs(self, s: Series) -> list[int]:
        """The indices of ``s`` drawn as an inf marker."""
        return [
            i for i, (x, y) in enumerate(zip(s.x, s.y, strict=False)) if y == math.inf and _ok(x, self.x.log)
        ]

    def band_drawn(self, s: Series) -> bool:
        b = s.band
        return b is not None and any(
            _ok(lo, self.y.log) and _ok(hi, self.y.log) and _ok(x, self.x.log)
            for x, lo, hi in zip(s.x, b.lo, b.hi, strict=False)
        )

    def refs_drawn(self) -> list[Ref]:
        """The reference lines drawn: a finite value its axis can show, or +inf on y (at the inf level)."""
        log = {"x": self.x.log, "y": self.y.log}
        return [r for r in self.refs if _ok(r.value, log[r.axis]) or (r.axis == "y" and r.value == math.inf)]

    def drawn(self) -> list[Series]:
        """The series with anything to draw (a point or an inf marker); the others are neither drawn nor
        listed."""
        return [s for s in self.series if self.points(s) or self.infs(s)]

    def inf_level(self) -> float:
        """Where +inf values are drawn: a decade above the largest finite value of the series, their bands
        and the horizontal reference lines (on a linear axis 10 % of it and 0.1 above)."""
        ys = [v for s in self.series for v in s.y]
        ys += [v for s in self.series if s.band is not None for v in s.band.hi]
        ys += [r.value for r in self.refs if r.axis == "y"]
        top = max((v for v in ys if _ok(v, self.y.log)), default=1.0)
        return top * 10.0 if self.y.log else top + abs(top) * 0.1 + 0.1

    def legend(self) -> list[Entry]:
        """What the legend lists, in order: per series drawn its band (where named and drawn), its line
        (where it has a point) and its inf markers (where it has +inf values, "<name>: inf"); then the
        reference lines drawn. Empty without a legend."""
        if not self.legend_shown:
            return []
        out: list[Entry] = []
        for s in self.drawn():
            if s.band is not None and s.band.name and self.band_drawn(s):
                out.append(Entry(s.band.name, "band", s.color, "solid", s.group, s.band.alpha))
            if self.points(s):
                out.append(Entry(s.name, "line", s.color, s.dash, s.group))
            if self.infs(s):
                out.append(Entry(s.name + INF_ENTRY, "inf", s.color, "solid", s.group))
        return out + [Entry(r.name, "ref", r.color, r.dash) for r in self.refs_drawn()]

    def legend_entries(self) -> list[str]:
        """The names the legend lists, in order (:meth:`legend`)."""
        return [e.name for e in self.legend()]


@dataclass(frozen=True)
class Entry:
    """One legend entry: its text, what its sample shows (a band's area, a line, an inf marker, a reference
    line), and that thing's colour, dash, group and opacity."""

    name: str
    kind: Literal["band", "line", "inf", "ref"]
    color: str
    dash: Dash = "solid"
    group: str = ""
    alpha: float = 1.0


@dataclass(frozen=True)
class Heatmap:
    """A rows × columns table of values in colour (magma; NaN cells blank): ``vrange`` the colour scale
    (else the values' range), ``log`` a log colour scale, values written into the cells up to
    :data:`ANNOTATE_MAX` cells with ``digits`` decimals (with ``log``: significant digits)."""

    title: str
    rows: Sequence[str]
    cols: Sequence[str]
    values: Sequence[Sequence[float]]
    what: str
    xlabel: str = "head"
    ylabel: str = "layer"
    vrange: tuple[float, float] | None = None
    log: bool = False
    digits: int = 3
    bar_label: str = ""


ANNOTATE_MAX = 400  # a heatmap writes its values into its cells up to this many cells


@dataclass(frozen=True)
class Figure:
    """One figure: ``title`` names the model and the inputs (the PNG's title; the page has its header);
    ``panels`` side by side in ``grid`` (rows, columns); ``size`` the PNG's size in inches; ``share_y``: the
    panels share their y axis."""

    title: str
    panels: Sequence[Panel | Heatmap]
    size: tuple[float, float]
    grid: tuple[int, int] = (1, 1)
    share_y: bool = False

    def panel(self, i: int) -> Panel:
        """The ``i``-th panel, a line chart (TypeError for a heatmap)."""
        found = self.panels[i]
        if not isinstance(found, Panel):
            raise TypeError(f"panel {i} of {self.title.splitlines()[0]!r} is a heatmap")
        return found
