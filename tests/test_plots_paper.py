"""Figures for a paper: every legend entry is something drawn, the colours are colour-blind safe (no pure
red, green or yellow; each visible on white), ``title=False`` leaves no title, the paper style is one
column of 8–9 pt type, and no "_" is visible in any label (mathtext in the PNG, scripts on the page).
Checked on the real reports of the session fixtures, in both styles."""

from __future__ import annotations

import colorsys
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from condcli import plots
from condcli.cli import figure_options
from condcli.figures.labels import html_text, mathtext, shown, svg_text
from condcli.figures.palette import DEPTH_TOP, OKABE_ITO, ROLE_COLORS, contrast_on_white
from condcli.html import render_html
from condcli.html.page import settings_line
from condcli.html.svg import WIDTH
from tests.html_dom import parse

Report = dict[str, Any]
STYLES = ("default", "paper")


def figures_of(spectrum: Report, sweep: Report, rank: Report, **kw: Any) -> Iterator[tuple[str, Figure]]:
    layers = plots.layers_figure(spectrum, **kw)
    assert layers is not None
    yield "spectrum", plots.spectrum_figure(spectrum, **kw)
    yield "layers", layers
    yield "sweep", plots.sweep_figure(sweep, **kw)
    yield "rank_decay", plots.rank_curves_figure(rank, **kw)
    yield "rank_heatmap", plots.rank_heatmap_figure(rank, **kw)


@pytest.mark.parametrize("style", STYLES)
def test_every_legend_entry_is_a_drawn_artist(
    spectrum: Report, sweep: Report, rank: Report, style: str
) -> None:
    """Each legend handle is an artist of its own axes, visible, with something the axes can show."""
    for name, fig in figures_of(spectrum, sweep, rank, style=style):
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            drawn = set(ax.lines) | set(ax.collections)
            named = {mathtext(str(a.get_label())): a for a in drawn if a.get_label()}
            for text in legend.get_texts():
                artist = named.get(text.get_text())
                assert artist is not None and artist.get_visible(), (name, text.get_text())
                if isinstance(artist, Line2D):
                    ys = [float(v) for v in np.asarray(artist.get_ydata(), dtype=np.float64)]
                    assert any(v == v for v in ys) or "ref" in name, (name, text.get_text())
                elif isinstance(artist, PolyCollection):
                    assert artist.get_paths(), (name, text.get_text())


def test_the_palette_has_no_pure_red_green_or_yellow_and_shows_on_white() -> None:
    depth = [to_hex(mpl.colormaps["viridis"](t / 20 * DEPTH_TOP)) for t in range(21)]
    for color in [*ROLE_COLORS.values(), *depth]:
        r, g, b = (int(color[k : k + 2], 16) / 255 for k in (1, 3, 5))
        hue, light, sat = colorsys.rgb_to_hls(r, g, b)
        pure = sat > 0.9 and 0.35 < light < 0.65
        assert not (pure and (hue < 0.03 or hue > 0.97 or abs(hue - 1 / 3) < 0.03)), color  # red, green
        assert not (45 / 360 < hue < 70 / 360 and light > 0.5), color  # yellow
        assert contrast_on_white(color) >= 1.9, color
    assert set(ROLE_COLORS.values()) - {"#666666"} <= set(OKABE_ITO.values()) - {OKABE_ITO["yellow"]}
    assert ROLE_COLORS["plain"] != "red" and ROLE_COLORS["conditioned"] != "green"


def test_the_track_layers_are_not_yellow() -> None:
    """The deepest layer of a track (depth 1) is the end of DEPTH_TOP, a green that shows on white."""
    from condcli.figures import depth, depth_of

    t = depth_of(depth(1.0))
    assert t is not None and t <= DEPTH_TOP
    assert contrast_on_white(to_hex(mpl.colormaps["viridis"](t))) >= 1.9


@pytest.mark.parametrize("style", STYLES)
def test_no_title_leaves_no_title(spectrum: Report, sweep: Report, rank: Report, style: str) -> None:
    for name, fig in figures_of(spectrum, sweep, rank, title=False, style=style):
        assert fig.get_suptitle() == "", name
        tags = [ax.get_title(loc) for ax in fig.axes for loc in ("left", "center", "right")]
        assert all(t == "" or re.fullmatch(r"\([a-z]\)", t) for t in tags), (name, tags)
    for name, fig in figures_of(spectrum, sweep, rank):
        titled = fig.get_suptitle() or any(ax.get_title() for ax in fig.axes)
        assert titled, name


def _texts(fig: Figure) -> list[Any]:
    suptitle = getattr(fig, "_suptitle", None)
    out = [suptitle] if suptitle is not None else []
    for ax in fig.axes:
        left = getattr(ax, "_left_title", None)  # the (a), (b) tags
        out += [ax.title, *([left] if left is not None else []), ax.xaxis.label, ax.yaxis.label]
        out += ax.get_xticklabels() + ax.get_yticklabels()
        legend = ax.get_legend()
        if legend is not None:
            out += legend.get_texts()
    return [t for t in out if t.get_text() and t.get_visible()]


def test_paper_style_is_one_column_of_8_to_9_pt(spectrum: Report, sweep: Report, rank: Report) -> None:
    for name, fig in figures_of(spectrum, sweep, rank, style="paper"):
        width, height = fig.get_size_inches()
        assert abs(width - 3.3) < 1e-9 and height > 1.5, name
        sizes = {round(t.get_fontsize(), 2) for t in _texts(fig)}
        assert sizes and min(sizes) >= 8 and max(sizes) <= 9, (name, sizes)
    with pytest.raises(Exception, match="figure style 'poster'"):
        plots.spectrum_figure(spectrum, style="poster")  # type: ignore[arg-type]


def test_paper_pdf_embeds_truetype_fonts(spectrum: Report, tmp_path: Any) -> None:
    (path,) = [
        p for p in plots.spectrum_plots(spectrum, tmp_path, "pdf", style="paper") if p.stem == "spectrum"
    ]
    data = path.read_bytes()
    assert b"/CIDFontType2" in data and b"/Type3" not in data  # TrueType (type 42), not Type 3 glyphs


def test_no_underscore_is_visible_in_a_figure(spectrum: Report, sweep: Report, rank: Report) -> None:
    """Outside $…$ no text shows "_": every script is mathtext ($\\kappa(X_\\ell)$)."""
    for name, fig in figures_of(spectrum, sweep, rank):
        for t in _texts(fig):
            plain = re.sub(r"(?<!\\)\$.*?(?<!\\)\$", "", t.get_text())
            assert "_" not in plain.replace(spectrum["model"]["spec"], ""), (name, t.get_text())
    assert mathtext("κ(X_l)") == "${\\kappa}({X}_{\\ell})$" and mathtext("σ_i") == "${\\sigma}_{i}$"
    assert (
        mathtext("μ(LA)") == "${\\mu}(LA)$"
        and mathtext("layer 3 (blocks.attn_q)") == "layer 3 (blocks.attn_q)"
    )


def test_no_underscore_is_visible_on_the_page(spectrum: Report, sweep: Report, rank: Report) -> None:
    for report in (spectrum, sweep, rank):
        tree = parse(render_html(report))
        for svg in tree.iter("svg"):
            for text in svg.iter("text"):
                assert "_" not in text.text(), text.text()
        for th in tree.iter("th"):
            assert "_" not in th.text(), th.text()
    assert svg_text("κ(X_l)") == 'κ(X<tspan class="sub" baseline-shift="sub" font-size="75%">ℓ</tspan>)'
    assert html_text("σ_max") == "σ<sub>max</sub>" and shown("κ(W_Q^h)") == "κ(WQh)"


def test_the_settings_row_reads_as_words() -> None:
    line = settings_line({"lambda": 10.0, "dtype": "float32", "conditioned_forward": True, "heads": False})
    assert line == "λ: 10, dtype: float32, conditioned forward: yes, heads: no"


def test_the_page_settings_row_is_human(spectrum: Report) -> None:
    header = next(parse(render_html(spectrum)).iter("header")).text()
    assert "conditioned forward: " in header and "conditioned_forward" not in header
    assert " True" not in header and " False" not in header


def test_page_charts_span_the_full_width(spectrum: Report, sweep: Report) -> None:
    page = render_html(spectrum)
    style = next(parse(page).iter("style")).text()
    assert re.search(r"svg\.chart\{width:100%\}", style)
    assert re.search(r"div\.pair>figure\.fig\{flex:1 1 100%", style)
    for report in (spectrum, sweep):
        for svg in parse(render_html(report)).iter("svg"):
            if "chart" in svg.attrs.get("class", "").split():
                assert int(svg.attrs["viewbox"].split()[2]) >= WIDTH


def test_conditioned_columns_are_folded_behind_a_checkbox(spectrum: Report) -> None:
    tree = parse(render_html(spectrum))
    table = tree.by_id("table-layers")
    folded = [th.text() for th in table.iter("th") if "folded" in th.attrs.get("class", "")]
    assert folded and all(h.endswith("+10I") for h in folded)
    box = tree.by_id("fold-table-layers")
    assert box.tag == "input" and box.attrs["type"] == "checkbox"
    style = next(tree.iter("style")).text()
    assert "input.fold:not(:checked)~.table-wrap .folded{display:none}" in style


def test_the_cli_options_offer_the_plots_styles_without_importing_matplotlib() -> None:
    assert figure_options.STYLES == plots.STYLES
    code = "import sys, condcli.cli.figure_options; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
