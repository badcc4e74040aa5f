"""One description per figure (condcli.figures): the PNG (condcli.plots) and the page (condcli.html) draw the
same description, so their legends list the same entries, in the same order, and those are the
description's series that are drawn (a series without a point an axis can show is neither drawn nor listed).

Checked on real reports (the session fixtures, and a ``track`` of three tiny ViT checkpoints), and on copies
changed where the two renderers used to disagree: a Weyl bound with no finite value, +inf medians, more
layers than a legend lists."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from condcli import figures, plots
from condcli.figures import INF_ENTRY, LEGEND_MAX, Heatmap, Panel
from condcli.figures import rank as rank_figures
from condcli.figures import spectrum as spectrum_figures
from condcli.figures import sweep as sweep_figures
from condcli.figures import track as track_figures
from condcli.figures.labels import mathtext, shown
from condcli.html import render_html
from condcli.plots.track import track_figure
from tests.html_dom import Node, parse
from tests.test_track import _vit_folders, vit_run  # noqa: F401  (the checkpoints' fixture)

Report = dict[str, Any]
# figure → (its description, its PNG, the page's chart id of each panel)
Case = tuple[figures.Figure, MplFigure, list[str]]


def png_legends(fig: MplFigure, count: int) -> list[list[str]]:
    """The legend entries of the first ``count`` axes (the panels; colour bars come after them); a legend the
    panels share, drawn once under the figure (rank-decay's), counts as each panel's."""
    shared = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    out = []
    for ax in fig.axes[:count]:
        legend = ax.get_legend()
        out.append([t.get_text() for t in legend.get_texts()] if legend is not None else shared)
    return out


def page_legend(svg: Node) -> list[str]:
    """The entries of a chart's legend on the page, in order."""
    return [t.text() for g in svg.iter("g") if g.attrs.get("class") == "legend" for t in g.iter("text")]


def drawable(panel: Panel, values: list[float]) -> bool:
    """Whether a series has a value its y axis can show (recomputed here, not the description's rule)."""
    return any(math.isfinite(v) and (v > 0 or not panel.y.log) for v in values)


def expected(panel: Panel) -> list[str]:
    """The legend a panel should have, from its series and reference lines directly."""
    if not panel.legend_shown:
        return []
    out = []
    for s in panel.series:
        ys = [float(v) for v in s.y]
        if s.band is not None and s.band.name and drawable(panel, [float(v) for v in s.band.hi]):
            out.append(s.band.name)
        if drawable(panel, ys):
            out.append(s.name)
        if any(v == math.inf for v in ys):
            out.append(s.name + INF_ENTRY)
    for r in panel.refs:
        if r.value == math.inf or (math.isfinite(r.value) and (r.value > 0 or r.axis == "x")):
            out.append(r.name)
    return out


def assert_same_legends(report: Report, case: Case) -> list[list[str]]:
    """The PNG's, the page's and the description's legends agree for every line panel; returns them."""
    desc, fig, ids = case
    page = parse(render_html(report))
    png = png_legends(fig, len(desc.panels))
    out = []
    for panel, chart_id, from_png in zip(desc.panels, ids, png, strict=True):
        if isinstance(panel, Heatmap):
            assert from_png == [] and page_legend(page.by_id(chart_id)) == []
            continue
        want = expected(panel)
        assert panel.legend_entries() == want, chart_id
        assert from_png == [mathtext(e) for e in want], chart_id  # the PNG sets each as mathtext
        assert page_legend(page.by_id(chart_id)) == [shown(e) for e in want], chart_id  # the page: scripts
        out.append(want)
    return out


def spectrum_cases(report: Report) -> list[Case]:
    layers = spectrum_figures.layers(report)
    assert layers is not None
    return [
        (spectrum_figures.spectrum(report), plots.spectrum_figure(report), ["chart-spectrum"]),
        (layers, _png(plots.layers_figure(report)), ["chart-layers-kappa", "chart-layers-mu"]),
    ]


def _png(fig: MplFigure | None) -> MplFigure:
    assert fig is not None
    return fig


def sweep_case(report: Report) -> Case:
    return sweep_figures.sweep(report), plots.sweep_figure(report), ["chart-sweep", "chart-sweep-layers"]


def rank_cases(report: Report) -> list[Case]:
    return [
        (rank_figures.curves(report), plots.rank_curves_figure(report), ["curves-plain", "curves-cond"]),
        (rank_figures.heatmap(report), plots.rank_heatmap_figure(report), ["heat-plain", "heat-cond"]),
    ]


TRACK_IDS = ["track-kappa-x", "track-kappa", "track-mu_la", "track-attention_entropy"]


@pytest.fixture(scope="module")
def track(request: pytest.FixtureRequest, cli_json: Callable[..., Report]) -> Report:
    """``condcli track`` over the three checkpoints of a tiny ViT (test_track's ``vit_run``), all layers."""
    root: Path = request.getfixturevalue("vit_run")
    return cli_json("track", *_vit_folders(root), "--max-samples", "3", "--layers", "all")


def test_spectrum_legends_are_one_list(spectrum: Report) -> None:
    spectrum_legend, kappa, mu = (
        entries for case in spectrum_cases(spectrum) for entries in assert_same_legends(spectrum, case)
    )
    assert spectrum_legend[0] == "σ_i(X): p10–p90" and spectrum_legend[1].startswith("σ_i(X) (median κ = ")
    lam = f"X + {spectrum['settings']['lambda']:g}·I_k"  # the conditioned forward named by its λ (issue 41)
    assert kappa == ["κ(X_l)", "κ(A_l)", f"κ(X_l), {lam}", f"κ(A_l), {lam}"]
    assert mu == ["μ(LA)", f"μ(LA), {lam}"]


def test_sweep_legends_are_one_list(sweep: Report) -> None:
    main, layers = assert_same_legends(sweep, sweep_case(sweep))
    assert sweep_figures.WEYL in main  # the fixture's grid reaches past σ_1: the bound is drawn
    assert layers == [f"layer {la['index']} ({la['name']})" for la in sweep["sweep"]["layers"]]


def test_rank_legends_are_one_list(rank: Report) -> None:
    legends = [e for case in rank_cases(rank) for e in assert_same_legends(rank, case)]
    m = rank["rank_decay"]["index_m"]
    for key, entries in zip(("rank_decay", "rank_decay_conditioned"), legends, strict=True):
        assert entries == [f"layer {la['index']}" for la in rank[key]["layers"]] + [f"m = {m}"]


def test_track_legends_are_one_list(track: Report) -> None:
    case = (track_figures.track(track), track_figure(track), TRACK_IDS)
    x, *layers = assert_same_legends(track, case)
    assert x == ["κ(X)", "κ(X + 10·I_k)"]
    assert layers == [["layer 0", "layer 1"]] * 3


def test_a_weyl_bound_without_a_finite_value_is_neither_drawn_nor_listed(sweep: Report) -> None:
    """The inconsistency this module ended: the legend listed a Weyl line that was not drawn."""
    data = copy.deepcopy(sweep)
    data["sweep"]["weyl_bound"] = ["inf"] * len(data["sweep"]["lambdas"])  # λ ≤ σ_1 everywhere
    main, _ = assert_same_legends(data, sweep_case(data))
    assert sweep_figures.WEYL not in main
    svg = parse(render_html(data)).by_id("chart-sweep")
    assert shown(sweep_figures.WEYL) not in {g.attrs.get("data-name") for g in svg.iter("g")}
    ax: Axes = plots.sweep_figure(data).axes[0]
    assert not any(sweep_figures.WEYL in str(line.get_label()) for line in ax.get_lines())


def test_infinite_medians_are_markers_listed_in_both_legends(spectrum: Report) -> None:
    data = copy.deepcopy(spectrum)
    data["layers"][1]["kappa"]["median"] = "inf"
    for layer in data["layers"]:  # a series of infinite values only: its markers, no line
        layer["kappa_attn_input"]["median"] = "inf"
    _, (layers, png, ids) = spectrum_cases(data)
    kappa, _ = assert_same_legends(data, (layers, png, ids))
    assert kappa[:3] == ["κ(X_l)", "κ(X_l): inf", "κ(A_l): inf"]
    svg = parse(render_html(data)).by_id("chart-layers-kappa")
    infs = [p for p in svg.iter("path") if p.attrs.get("data-value") == "Infinity"]
    assert len(infs) == 1 + len(data["layers"])


def test_more_layers_than_a_legend_lists_give_a_colour_bar_in_both(rank: Report) -> None:
    data = copy.deepcopy(rank)
    for key in ("rank_decay", "rank_decay_conditioned"):
        layers = data[key]["layers"]
        extra = [dict(layers[-1], index=layers[-1]["index"] + 1 + i) for i in range(LEGEND_MAX)]
        data[key]["layers"] = layers + extra
    desc, png, ids = rank_cases(data)[0]
    assert assert_same_legends(data, (desc, png, ids)) == [[], []]
    assert len(png.axes) == 3  # the two panels and one depth colour bar for both
    page = parse(render_html(data))
    for chart_id in ids:
        assert [g for g in page.by_id(chart_id).iter("g") if g.attrs.get("class") == "depthbar"]
