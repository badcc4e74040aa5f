"""The page's inline SVG: every drawn point is the report's value through the axis transform stated on the
<svg> (recomputed here from the attributes), hover values are full precision, +inf is a marker above the
finite values, and each chart has the series, labels and scales of the matching PNG figure
(condcli.plots)."""

from __future__ import annotations

import math
from typing import Any

from condcli import plots
from condcli.figures import spectrum as spectrum_figures
from condcli.figures.labels import mathtext, shown
from condcli.html import render_html
from condcli.html.svg import Chart, RefLine, Series, line_chart
from tests.html_dom import Node, parse
from tests.html_reports import jf

Report = dict[str, Any]
TOL = 0.051  # points are written with one decimal


class Transform:
    """The axis transform of one chart, read from its attributes and recomputed independently."""

    def __init__(self, svg: Node) -> None:
        self.left, self.top, self.width, self.height = map(float, svg.attrs["data-plot"].split())
        xlo, xhi, xs = svg.attrs["data-x"].split()
        ylo, yhi, ys = svg.attrs["data-y"].split()
        self.x = (float(xlo), float(xhi), xs == "log")
        self.y = (float(ylo), float(yhi), ys == "log")

    @staticmethod
    def _frac(v: float, axis: tuple[float, float, bool]) -> float:
        lo, hi, log = axis
        if log:
            return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return (v - lo) / (hi - lo)

    def px(self, x: float) -> float:
        return self.left + self.width * self._frac(x, self.x)

    def py(self, y: float) -> float:
        return self.top + self.height * (1 - self._frac(y, self.y))


def points(polyline: Node) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in (p.split(",") for p in polyline.attrs["points"].split())]


def series(svg: Node) -> dict[str, Node]:
    return {g.attrs["data-name"]: g for g in svg.iter("g") if "series" in g.attrs.get("class", "").split()}


def legend(svg: Node) -> set[str]:
    return {t.text() for g in svg.iter("g") if g.attrs.get("class") == "legend" for t in g.iter("text")}


def mpl_labels(*axes: Any) -> set[str]:
    """The labelled artists of matplotlib axes (inf markers included: both legends list them), as the page
    shows them (scripts set: no "_")."""
    return {shown(label) for ax in axes for label in ax.get_legend_handles_labels()[1]}


def assert_line(svg: Node, g: Node, xs: list[float], ys: list[float]) -> None:
    """The series' polyline passes through (x, y) for every drawable value, in order."""
    t = Transform(svg)
    want = [
        (t.px(x), t.py(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(y) and (y > 0 or not t.y[2])
    ]
    got = [p for line in g.iter("polyline") for p in points(line)]
    assert len(got) == len(want)
    for (a, b), (c, d) in zip(got, want, strict=True):
        assert abs(a - c) <= TOL and abs(b - d) <= TOL, ((a, b), (c, d))
    ys_attr = next(g.iter("polyline")).attrs.get("data-ys")
    if ys_attr is not None:  # the hover values: the report's, to full precision
        values = [float(v) for v in ys_attr.split()]
        assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(values, ys, strict=True))


def test_synthetic_chart_points_inf_marker_and_band() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]
    ys = [1e3, 2e2, math.inf, 7.0, math.nan]
    chart = Chart(
        "t",
        "x",
        "y",
        [
            Series(
                "s",
                xs,
                ys,
                "#ff0000",
                band=([5e2, 1e2, 1.0, 2.0, 1.0], [2e3, 3e2, 9.0, 9.0, 9.0]),
                markers=True,
            )
        ],
        refs=[RefLine(50.0, "ref", "#000", "y"), RefLine(2.5, "vline", "#000", "x")],
    )
    svg = next(parse(line_chart(chart, "c")).iter("svg"))
    t = Transform(svg)
    assert t.y[2] and not t.x[2]
    g = series(svg)["s"]
    assert_line(svg, g, xs, ys)
    assert len(list(g.iter("polyline"))) == 2  # the inf breaks the line, NaN is not drawn
    marker = next(p for p in g.iter("path") if p.attrs.get("data-value") == "Infinity")
    tip_y = float(marker.attrs["d"].split("L")[2].split(",")[1].rstrip(" Z"))
    assert tip_y < t.py(1e3)  # above the largest finite value, inside the plot
    assert t.y[0] <= 1.0 and t.y[1] >= 2e3 * 10  # every value and the inf level fit the axis
    band = next(g.iter("polygon"))
    pts = points(band)
    want = [(t.px(x), t.py(v)) for x, v in zip(xs, [2e3, 3e2, 9.0, 9.0, 9.0], strict=True)]
    want += [(t.px(x), t.py(v)) for x, v in reversed(list(zip(xs, [5e2, 1e2, 1.0, 2.0, 1.0], strict=True)))]
    assert all(abs(a - c) <= TOL and abs(b - d) <= TOL for (a, b), (c, d) in zip(pts, want, strict=True))
    circles = list(g.iter("circle"))
    assert [float(c.attrs["data-value"]) for c in circles] == [1e3, 2e2, 7.0]
    ref = next(n for n in svg.iter("line") if n.attrs.get("data-value") == "50.0")
    assert abs(float(ref.attrs["y1"]) - t.py(50.0)) <= 0.01


def test_spectrum_figure_points_are_the_report_spectrum(spectrum: Report) -> None:
    page = parse(render_html(spectrum))
    svg = page.by_id("chart-spectrum")
    emb = spectrum["embedding"]
    got = series(svg)
    for key, prefix in (("spectrum", shown("σ_i(X) (")), ("spectrum_conditioned", shown("σ_i(X + λ·I_k)"))):
        g = next(v for k, v in got.items() if k.startswith(prefix))
        median = [jf(v) for v in emb[key]["median"]]
        assert_line(svg, g, [float(i) for i in range(1, len(median) + 1)], median)
    fig = plots.spectrum_figure(spectrum)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and Transform(svg).y[2]
    assert legend(svg) == mpl_labels(ax)
    panel = spectrum_figures.spectrum(spectrum).panel(0)
    for label, mpl_label in ((panel.x.label, ax.get_xlabel()), (panel.y.label, ax.get_ylabel())):
        assert shown(label) in svg.text() and mpl_label == mathtext(label)  # one label, set by each


def test_layer_curves_are_the_layer_medians(spectrum: Report) -> None:
    page = parse(render_html(spectrum))
    fig = plots.layers_figure(spectrum)
    assert fig is not None
    left, right = fig.axes[:2]
    layers = spectrum["layers"]
    x = [float(layer["index"]) for layer in layers]
    for chart_id, ax in (("chart-layers-kappa", left), ("chart-layers-mu", right)):
        svg = page.by_id(chart_id)
        assert legend(svg) == mpl_labels(ax) and ax.get_yscale() == "log" and Transform(svg).y[2]
        t = Transform(svg)
        for name, g in series(svg).items():
            names = {"κ(X_l)": "kappa", "κ(A_l)": "kappa_attn_input", "μ(LA)": "mu_la"}
            key = {shown(k): v for k, v in names.items()}[name.split(",")[0]]
            cond = ", X + " in name  # the conditioned forward, named by its λ
            ys = [jf((layer["conditioned"] if cond else layer)[key]["median"]) for layer in layers]
            assert_line(svg, g, x, ys)
            marks = [m for m in g.iter() if m.tag in ("circle", "rect") and "data-value" in m.attrs]
            for c, xv, yv in zip(marks, x, ys, strict=True):  # dots, or hollow squares (κ(A_l)) round them
                assert float(c.attrs["data-value"]) == yv
                half = 5.0 if c.tag == "rect" else 0.0
                cx = float(c.attrs["cx"] if c.tag == "circle" else c.attrs["x"]) + half
                cy = float(c.attrs["cy"] if c.tag == "circle" else c.attrs["y"]) + half
                assert abs(cx - t.px(xv)) <= 0.006 and abs(cy - t.py(yv)) <= 0.006


def test_sweep_chart_matches_the_sweep_figure(sweep: Report) -> None:
    svg = parse(render_html(sweep)).by_id("chart-sweep")
    s = sweep["sweep"]
    lambdas = [jf(v) for v in s["lambdas"]]
    got = series(svg)
    assert_line(svg, got[shown("κ(X + λ·I_k), median")], lambdas, [jf(v) for v in s["kappa"]["median"]])
    weyl = [jf(v) for v in s["weyl_bound"]]
    assert_line(
        svg,
        got[shown("Weyl bound (σ_1+λ)/(λ−σ_1)")],
        lambdas,
        [v if math.isfinite(v) else math.nan for v in weyl],
    )
    ax = plots.sweep_figure(sweep).axes[0]
    assert legend(svg) == mpl_labels(ax)
    t = Transform(svg)
    assert (ax.get_xscale() == "log") == t.x[2] and ax.get_yscale() == "log" and t.y[2]
    rec = jf(s["recommended_lambda"])
    line = next(
        n for n in svg.iter("line") if "ref" in n.attrs.get("class", "") and n.attrs["x1"] == n.attrs["x2"]
    )
    assert float(line.attrs["data-value"]) == rec and abs(float(line.attrs["x1"]) - t.px(rec)) <= 0.01


def test_rank_curves_match_the_rank_figure(rank: Report) -> None:
    page = parse(render_html(rank))
    fig = plots.rank_curves_figure(rank)
    for suffix, key, ax in (
        ("plain", "rank_decay", fig.axes[0]),
        ("cond", "rank_decay_conditioned", fig.axes[1]),
    ):
        svg = page.by_id(f"curves-{suffix}")
        t = Transform(svg)
        assert (ax.get_xscale() == "log") == t.x[2] and not t.y[2]
        assert legend(svg) == mpl_labels(ax)
        assert t.y[1] == 1.02 and abs(t.y[0] - fig.axes[0].get_ylim()[0]) < 1e-12  # the PNG's shared y range
        got = series(svg)
        for layer in rank[key]["layers"]:
            median = [jf(v) for v in layer["cumulative"]["median"]]
            assert_line(
                svg,
                got[shown(f"layer {layer['index']}")],
                [float(j) for j in range(1, len(median) + 1)],
                median,
            )
