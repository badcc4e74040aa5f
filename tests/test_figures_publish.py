"""Figures a researcher would publish as they are (issue 41): every legend entry names something a reader
can see, the rank axis reads the rank at 90 %, each rank heatmap panel has its own colour scale, the layers
figure tells κ(X_l) from κ(A_l) and names λ, the paper style is a 300 dpi column with a compact legend, and
the page sets every script and keeps the name of m off the curves.

Checked on the shipped sample ViT (the session fixtures: spectrum, sweep-lambda, rank-decay --conditioned)
and on a tiny random-init Llama (tests/tiny_llm.py), in both styles. What is visible is recomputed here
from the matplotlib artists in display coordinates, not taken from the description."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from PIL import Image

from condcli import plots
from condcli.figures.labels import html_text, mathtext
from condcli.html import render_html
from condcli.html.heatmap import MAGMA, color_at
from condcli.plots.draw import log_tick
from condcli.plots.style import Style
from tests.html_dom import Node, parse
from tests.tiny_llm import tiny_llama

Report = dict[str, Any]
STYLES: tuple[Style, ...] = ("default", "paper")
BAND_AREA = 0.005  # a band covering less than this share of its panel is a line, not a band


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory, cli_json: Callable[..., Report]) -> dict[str, Report]:
    """spectrum and rank-decay --conditioned of a tiny random-init Llama (two layers, random tokens)."""
    folder = tmp_path_factory.mktemp("llama") / "llama"
    tiny_llama(folder, num_hidden_layers=2)
    fast = ("--max-samples", "2", "--layers", "all")
    return {
        "spectrum": cli_json("spectrum", str(folder), *fast, "--heads"),
        "rank": cli_json("rank-decay", str(folder), *fast, "--conditioned", "10"),
    }


def figures_of(
    spectrum: Report, rank: Report, sweep: Report | None, style: Style
) -> Iterator[tuple[str, Figure]]:
    layers = plots.layers_figure(spectrum, style=style)
    assert layers is not None
    yield "spectrum", plots.spectrum_figure(spectrum, style=style)
    yield "layers", layers
    if sweep is not None:
        yield "sweep", plots.sweep_figure(sweep, style=style)
    yield "rank_decay", plots.rank_curves_figure(rank, style=style)
    yield "rank_heatmap", plots.rank_heatmap_figure(rank, style=style)


def legends(fig: Figure) -> list[tuple[Legend, list[Axes]]]:
    """Each legend with the axes its entries may be drawn in: a panel's own, or every panel for the
    figure's."""
    out = [(legend, [ax]) for ax in fig.axes if (legend := ax.get_legend()) is not None]
    return out + [(legend, list(fig.axes)) for legend in fig.legends]


def _inside(ax: Axes, points: np.ndarray) -> np.ndarray:
    """The finite display points inside ``ax``'s plot box (half a pixel of tolerance)."""
    box = ax.bbox
    ok = np.isfinite(points).all(axis=1)
    x, y = points[:, 0], points[:, 1]
    within = (x >= box.x0 - 0.5) & (x <= box.x1 + 0.5) & (y >= box.y0 - 0.5) & (y <= box.y1 + 0.5)
    return np.asarray(points[ok & within])


def band_share(ax: Axes, band: PolyCollection) -> float:
    """The share of the panel the band covers (its polygons clipped to the plot box, shoelace area)."""
    box = ax.bbox
    area = 0.0
    for path in band.get_paths():
        v = band.get_transform().transform(path.vertices)
        x, y = np.clip(v[:, 0], box.x0, box.x1), np.clip(v[:, 1], box.y0, box.y1)
        area += 0.5 * abs(float(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))
    return area / (box.width * box.height)


def seen(ax: Axes, artist: Any) -> str:
    """Why ``artist`` in ``ax`` shows nothing ("" where a reader sees it)."""
    if not artist.get_visible():
        return "hidden"
    alpha = artist.get_alpha()
    if alpha is not None and alpha <= 0:
        return "alpha 0"
    if isinstance(artist, Line2D):
        shown = artist.get_linestyle() not in ("None", "none", "") or artist.get_marker() not in ("None", "")
        if not shown or (artist.get_linewidth() <= 0 and artist.get_marker() in ("None", "")):
            return "no line and no marker"
        if to_rgba(artist.get_color())[3] <= 0:
            return "transparent colour"
        points = artist.get_transform().transform(np.asarray(artist.get_xydata(), dtype=np.float64))
        return "" if len(_inside(ax, points)) else "no finite point inside the axes"
    if isinstance(artist, PolyCollection):
        faces = artist.get_facecolor()
        if len(faces) == 0 or all(float(np.asarray(f)[3]) <= 0 for f in faces):
            return "transparent fill"
        share = band_share(ax, artist)
        return "" if share >= BAND_AREA else f"a band of {share:.2%} of the panel: hidden under its line"
    return f"unknown artist {type(artist).__name__}"


def invisible_entries(fig: Figure) -> list[str]:
    """The legend entries of ``fig`` that name nothing a reader sees."""
    bad = []
    for legend, where in legends(fig):
        for text in legend.get_texts():
            found = [
                (ax, a)
                for ax in where
                for a in [*ax.lines, *ax.collections]
                if a.get_label() and mathtext(str(a.get_label())) == text.get_text()
            ]
            reasons = [seen(ax, a) for ax, a in found] or ["no artist of that name"]
            if all(reasons):
                bad.append(f"{text.get_text()}: {reasons[0]}")
    return bad


@pytest.mark.parametrize("style", STYLES)
def test_every_legend_entry_is_something_seen_on_the_sample(
    spectrum: Report, sweep: Report, rank: Report, style: Style
) -> None:
    for name, fig in figures_of(spectrum, rank, sweep, style):
        assert invisible_entries(fig) == [], name


@pytest.mark.parametrize("style", STYLES)
def test_every_legend_entry_is_something_seen_on_a_llama(llama: dict[str, Report], style: Style) -> None:
    for name, fig in figures_of(llama["spectrum"], llama["rank"], None, style):
        assert invisible_entries(fig) == [], name


def test_the_check_catches_a_band_under_its_line(spectrum: Report) -> None:
    """The defect the check is for: a named p10–p90 band as thin as its line is listed but not seen."""
    fig = plots.layers_figure(spectrum)
    assert fig is not None
    ax = fig.axes[0]
    line = ax.lines[0]
    x = np.asarray(line.get_xdata(), dtype=np.float64)
    y = np.asarray(line.get_ydata(), dtype=np.float64)
    ax.fill_between(x, y * 0.999, y * 1.001, alpha=0.2, label="thin band")
    ax.plot(x, np.full_like(x, np.nan), label="no value")
    ax.legend()
    bad = invisible_entries(fig)
    assert any(b.startswith("thin band: a band of") for b in bad)
    assert "no value: no finite point inside the axes" in bad


def _rank90s(section: Report) -> set[str]:
    return {str(round(float(la["rank90"]["median"]))) for la in section["layers"]}


@pytest.mark.parametrize("style", STYLES)
def test_the_rank_axis_reads_the_rank_at_90_percent(rank: Report, style: Style) -> None:
    fig = plots.rank_curves_figure(rank, style=style)
    for ax, key in zip(fig.axes, ("rank_decay", "rank_decay_conditioned"), strict=False):
        assert ax.get_xscale() == "log"  # 65 tokens: a log index axis
        lo, hi = ax.get_xlim()
        labels = {
            t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi
        }
        assert {"1", "2", "3", "4", "5", "10"} <= labels, labels
        assert _rank90s(rank[key]) <= labels, (key, labels)
    page = parse(render_html(rank))
    for chart_id, key in (("curves-plain", "rank_decay"), ("curves-cond", "rank_decay_conditioned")):
        ticks = {t.text() for t in page.by_id(chart_id).iter("text") if t.attrs.get("class") == "tick"}
        assert _rank90s(rank[key]) | {"1", "2", "3"} <= ticks, (chart_id, ticks)


def test_the_rank_curves_have_one_legend_and_neighbouring_layers_differ(rank: Report) -> None:
    fig = plots.rank_curves_figure(rank)
    assert [ax.get_legend() for ax in fig.axes] == [None, None] and len(fig.legends) == 1
    entries = [t.get_text() for t in fig.legends[0].get_texts()]
    assert entries == [f"layer {la['index']}" for la in rank["rank_decay"]["layers"]] + [
        f"m = {rank['rank_decay']['index_m']}"
    ]
    lines = [ln for ln in fig.axes[0].lines if str(ln.get_label()).startswith("layer ")]
    for a, b in itertools.pairwise(lines):  # colour alone is not enough in thin lines
        assert a.get_linestyle() != b.get_linestyle(), (a.get_label(), b.get_label())


def _panel_range(section: Report) -> tuple[float, float]:
    values = [float(v) for la in section["layers"] for v in la["heads_at_m"] if v is not None]
    finite = [v for v in values if math.isfinite(v)]
    return min(finite), max(finite)


def test_each_rank_heatmap_panel_has_its_own_colour_scale(rank: Report) -> None:
    fig = plots.rank_heatmap_figure(rank)
    images = [im for ax in fig.axes for im in ax.images if isinstance(im, AxesImage)]
    assert len(images) == 2 and len(fig.axes) == 4  # two panels, each with its colour bar
    for image, key in zip(images, ("rank_decay", "rank_decay_conditioned"), strict=True):
        lo, hi = _panel_range(rank[key])
        assert image.norm.vmin == pytest.approx(lo) and image.norm.vmax == pytest.approx(hi), key
    page = parse(render_html(rank))
    for chart_id, key in (("heat-plain", "rank_decay"), ("heat-cond", "rank_decay_conditioned")):
        cells = [r for r in page.by_id(chart_id).iter("rect") if "data-value" in r.attrs]
        lo, hi = _panel_range(rank[key])
        low = [c.attrs["fill"] for c in cells if float(c.attrs["data-value"]) == lo]
        high = [c.attrs["fill"] for c in cells if float(c.attrs["data-value"]) == hi]
        assert low and set(low) == {color_at(MAGMA, 0.0)}, chart_id  # each end of its own scale
        assert high and set(high) == {color_at(MAGMA, 1.0)}, chart_id


def test_the_layers_figure_names_lambda_and_shows_both_kappas(spectrum: Report) -> None:
    fig = plots.layers_figure(spectrum)
    assert fig is not None
    ax = fig.axes[0]
    lam = f"{float(spectrum['settings']['lambda']):g}"
    legend = ax.get_legend()
    assert legend is not None
    entries = [t.get_text() for t in legend.get_texts()]
    assert sum(mathtext(f"X + {lam}·I_k") in e for e in entries) == 2, entries
    markers = {str(ln.get_label()): (ln.get_marker(), ln.get_markerfacecolor()) for ln in ax.lines}
    dot, square = markers["κ(X_l)"], markers["κ(A_l)"]
    assert dot[0] == "o" and square[0] == "s" and square[1] == "none"  # the dot shows inside the square
    lo, hi = ax.get_ylim()
    labelled = [t for t in ax.get_yticklabels() if t.get_text() and lo <= t.get_position()[1] <= hi]
    assert len(labelled) >= 2 * math.log10(hi / lo), [t.get_text() for t in labelled]  # not decades only


def test_the_paper_style_is_a_300_dpi_column_with_a_compact_legend(
    spectrum: Report, rank: Report, tmp_path: Path
) -> None:
    for name, fig in figures_of(spectrum, rank, None, "paper"):
        height = fig.get_window_extent().height
        share = sum(legend.get_window_extent().height for legend, _ in legends(fig)) / height
        assert share <= 0.2, (name, share)
    written = plots.rank_decay_plots(rank, tmp_path / "r", "png", style="paper")
    written += plots.spectrum_plots(spectrum, tmp_path / "s", "png", style="paper")
    for path in written:
        image = Image.open(path)
        dpi = image.info["dpi"]
        assert min(dpi) >= 299.5 and image.size[0] == round(3.3 * 300), (path.name, image.size, dpi)


def visible_text(page: str) -> str:
    """The page's text a reader sees: no scripts, styles or tags."""
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)
    return re.sub(r"<[^>]+>", "", page)


def raw_scripts(text: str) -> list[str]:
    """Each "_" that stands for a subscript: after a single letter, a Greek letter, a digit-led term or a
    bracket ("X_l", "2σ_1", "Σσ_i", "‖X‖_F"), not inside a module's or a key's name ("pos_drop")."""
    out = []
    for m in re.finditer(r"_(?=[A-Za-z0-9ℓ])", text):
        before = re.search(r"[A-Za-z0-9.]*$", text[: m.start()])
        word = before.group(0) if before else ""
        if len(word.rsplit(".", 1)[-1]) < 2 or re.fullmatch(r"\d+[A-Za-z]", word):
            out.append(text[max(0, m.start() - 12) : m.end() + 3])
    return out


def test_the_page_shows_no_raw_underscore(spectrum: Report, rank: Report) -> None:
    for report in (spectrum, rank):
        assert raw_scripts(visible_text(render_html(report))) == []
    caught = raw_scripts("2σ_1/(σ_1 + σ_k), X + 10·I_k, u·‖X‖_F, Σσ_i², pos_drop, conv2d_1")
    assert len(caught) == 6 and not any("pos_drop" in c or "conv2d" in c for c in caught), caught
    assert html_text("2σ_1/(σ_1 + σ_k)") == "2σ<sub>1</sub>/(σ<sub>1</sub> + σ<sub>k</sub>)"
    assert html_text("Σσ_i²") == "Σσ<sub>i</sub>²" and html_text("u·‖X‖_F") == "u·‖X‖<sub>F</sub>"
    assert html_text("conv2d_1 (blocks.attn_q)") == "conv2d_1 (blocks.attn_q)"


def _points(svg: Node) -> list[list[tuple[float, float]]]:
    return [
        [(float(a), float(b)) for a, b in (p.split(",") for p in line.attrs["points"].split())]
        for line in svg.iter("polyline")
    ]


def test_the_name_of_m_is_off_the_rank_curves(rank: Report) -> None:
    """The "m = 16" label (14 px, at most 9 px a character) covers no point of a curve on the page."""
    page = parse(render_html(rank))
    for chart_id in ("curves-plain", "curves-cond"):
        svg = page.by_id(chart_id)
        (label,) = [t for t in svg.iter("text") if t.attrs.get("class") == "reflabel"]
        x, y = float(label.attrs["x"]), float(label.attrs["y"])
        width = 9 * len(label.text())
        x0 = x if label.attrs.get("text-anchor") == "start" else x - width
        box = (x0, y - 14, x0 + width, y + 4)
        for run in _points(svg):
            for (ax_, ay_), (bx, by) in itertools.pairwise(run):
                for t in np.linspace(0, 1, 50):
                    px, py = ax_ + (bx - ax_) * t, ay_ + (by - ay_) * t
                    assert not (box[0] <= px <= box[2] and box[1] <= py <= box[3]), (chart_id, label.text())


def test_no_tick_label_is_e_notation(llama: dict[str, Report], spectrum: Report, rank: Report) -> None:
    """Labels between decades read "500", "2000", or 2×10⁴ in mathtext, never "2e+04" (the tiny Llama's
    μ(LA) spans 1.6 decades above 10⁴)."""
    for report, report_rank in ((llama["spectrum"], llama["rank"]), (spectrum, rank)):
        for name, fig in figures_of(report, report_rank, None, "default"):
            for ax in fig.axes:
                for t in ax.get_xticklabels() + ax.get_yticklabels():
                    assert not re.search(r"\de[+-]\d", t.get_text()), (name, t.get_text())
    assert [log_tick(v, True) for v in (0.002, 500.0, 1000.0)] == ["0.002", "500", "1000"]
    assert [log_tick(v, False) for v in (500.0, 1000.0, 2e4, 5e-5)] == [
        "$5{\\times}10^{2}$",
        "$10^{3}$",
        "$2{\\times}10^{4}$",
        "$5{\\times}10^{-5}$",
    ]
