"""The page around the sections: the header (compact; both models of a compare), the κ(X) headline on every
page whose report has an embedding section (read from the report's JSON, medians recomputed with NumPy),
the sweep's registry labels and a recommended λ that stays visible at the end of the grid, PASS/FAIL by
class, wrapping text columns, charts two per row, rank-decay colours as the PNG draws them, and one
number formatter for the CLI and the page."""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import numpy as np
import pytest

from condcli import plots
from condcli.figures.labels import shown
from condcli.html import render_html
from condcli.reports.metrics import EMBEDDING
from tests.html_dom import Node, parse
from tests.html_reports import jf, sig3
from tests.test_report_cmd import check_report, compare_report

Report = dict[str, Any]
LABEL = {m.key: m.label for m in EMBEDDING}


def header(page: str) -> Node:
    return next(parse(page).iter("header"))


def kpis(node: Node) -> dict[str, Node]:
    return {n.attrs["data-key"]: n for n in node.iter("div") if "kpi" in n.attrs.get("class", "").split()}


def median_text(agg: dict[str, Any], below: bool = False) -> str:
    """The median of the per-sample values (NumPy) as the tables print it, with the report's marks."""
    median = float(np.median(np.asarray([jf(v) for v in agg["per_sample"]])))
    assert median == jf(agg["median"])
    if (agg.get("floor") or {}).get("median"):
        return f"≥ {median:.2g} ⚠"
    return sig3(median) + (" ⚠" if below or agg.get("floor_count") else "")


def test_kappa_headline_on_every_page_with_an_embedding(
    spectrum: Report, sweep: Report, rank: Report
) -> None:
    for report in (spectrum, sweep, rank, check_report()):
        emb = report["embedding"]
        boxes = kpis(header(render_html(report)))
        box = boxes["embedding.kappa"]
        assert float(box.attrs["data-value"]) == jf(emb["kappa"]["median"])
        below = bool(emb.get("below_precision_samples") or emb.get("below_precision"))
        assert next(box.iter("b")).text() == median_text(emb["kappa"], below)
        assert LABEL["kappa"] in box.text()
    compare = compare_report()
    boxes = kpis(header(render_html(compare)))
    for side in ("a", "b"):
        box = boxes[f"{side}.embedding.kappa"]
        assert next(box.iter("b")).text() == median_text(compare[side]["embedding"]["kappa"])
        assert compare[side]["model"]["spec"] in box.text()


def test_kappa_headline_marks_a_floor_and_samples_below_resolution(spectrum: Report) -> None:
    floor = copy.deepcopy(spectrum)
    floor["embedding"]["kappa"]["floor"] = {**floor["embedding"]["kappa"].get("floor", {}), "median": True}
    box = kpis(header(render_html(floor)))["embedding.kappa"]
    assert next(box.iter("b")).text() == f"≥ {jf(spectrum['embedding']['kappa']['median']):.2g} ⚠"
    assert "only a floor" in box.attrs["title"]
    below = copy.deepcopy(spectrum)
    below["embedding"]["below_precision_samples"] = [0]
    box = kpis(header(render_html(below)))["embedding.kappa"]
    assert next(box.iter("b")).text() == sig3(jf(spectrum["embedding"]["kappa"]["median"])) + " ⚠"


def test_header_is_short_and_the_long_descriptions_are_behind_a_disclosure(spectrum: Report) -> None:
    top = header(render_html(spectrum))
    summary = next(top.iter("dl"))  # the first list: the short lines
    more = next(n for n in top.iter("details") if "more" in n.attrs.get("class", ""))
    assert len(summary.direct("dt")) <= 5
    for long in (spectrum["inputs"]["preprocessing"], spectrum["embedding"]["description"]):
        assert long not in summary.text() and long in more.text()
    text = summary.text()
    assert spectrum["model"]["spec"] in text and spectrum["embedding"]["where"] in text
    assert f"{spectrum['inputs']['count']} " in text and f"{spectrum['inputs']['tokens']} tokens" in text


def test_compare_header_names_both_models_and_their_inputs() -> None:
    data = compare_report()
    data["b"]["inputs"].update(count=7, kind="images")  # the two sides differ
    for side, tokens in (("a", 65), ("b", 197)):
        data[side]["inputs"].update(tokens=tokens, dim=96)
    top = header(render_html(data))
    a, b = data["a"]["model"]["spec"], data["b"]["model"]["spec"]
    assert f"{a} vs {b}" in next(top.iter("h1")).text()
    summary = next(top.iter("dl"))
    rows = dict(zip((dt.text() for dt in summary.direct("dt")), summary.direct("dd"), strict=True))
    for side, spec in (("A", a), ("B", b)):
        line = rows[side].text()
        inputs = data[side.lower()]["inputs"]
        what = "images" if inputs["kind"] == "images" else f"{inputs['kind']} samples"  # "7 images"
        assert line.startswith(spec) and f"{inputs['count']} {what}," in line and "images samples" not in line
        assert f"up to {inputs['tokens']} tokens × d {inputs['dim']}" in line


def test_sweep_legend_labels_are_the_registry_labels(sweep: Report) -> None:
    svg = parse(render_html(sweep)).by_id("chart-sweep")
    legend = {t.text() for g in svg.iter("g") if g.attrs.get("class") == "legend" for t in g.iter("text")}
    s = sweep["sweep"]
    assert shown(f"{LABEL['kappa']} = {sig3(jf(s['kappa_plain']))}") in legend  # scripts set, no "_"
    assert shown(f"{LABEL['kappa_corrected']} = {sig3(jf(s['kappa_corrected']))}") in legend
    assert shown(f"{LABEL['kappa_conditioned']}, median") in legend


@pytest.mark.parametrize("end", [0, -1])
def test_a_recommended_lambda_at_the_end_of_the_grid_is_visible_and_labelled(sweep: Report, end: int) -> None:
    data = copy.deepcopy(sweep)
    rec = jf(data["sweep"]["lambdas"][end])
    data["sweep"]["recommended_lambda"] = rec
    svg = parse(render_html(data)).by_id("chart-sweep")
    left, _, width, _ = map(float, svg.attrs["data-plot"].split())
    line = next(
        n
        for n in svg.iter("line")
        if "ref" in n.attrs.get("class", "") and float(n.attrs["data-value"]) == rec
    )
    x = float(line.attrs["x1"])
    assert left + 5 <= x <= left + width - 5  # off the plot's frame, where the eye sees it
    labels = [t for t in svg.iter("text") if "reflabel" in t.attrs.get("class", "")]
    vertical = [t.text() for t in labels if "data-value" not in t.attrs]  # the others name y lines
    assert vertical == [f"recommended λ = {sig3(rec)}"]


def css(page: str) -> dict[str, str]:
    """selector → declarations of the page's stylesheet (a selector list split into its selectors)."""
    style = next(parse(page).iter("style")).text()
    rules: dict[str, str] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", style):
        for sel in selectors.split(","):
            rules[sel.strip()] = rules.get(sel.strip(), "") + ";" + body
    return rules


def test_text_columns_wrap_and_numbers_do_not(spectrum: Report) -> None:
    rules = css(render_html(spectrum))
    assert "white-space:normal" in rules["td"] and "nowrap" not in rules["td"]
    assert "white-space:nowrap" in rules["td.num"]


def test_pass_and_fail_are_classes_not_inline_styles() -> None:
    page = render_html(check_report())
    tree = parse(page)
    assert [n.tag for n in tree.iter() if "style" in n.attrs] == []
    rules = css(page)
    assert "color" in rules[".pass"] and "color" in rules[".fail"]
    results = {
        td.text(): td.attrs.get("class", "").split()
        for td in tree.by_id("check-rules-table").iter("td")
        if td.text() in ("PASS", "FAIL")
    }
    assert "pass" in results["PASS"] and "fail" in results["FAIL"]
    verdict = next(p for p in tree.iter("p") if "verdict" in p.attrs.get("class", ""))
    assert "fail" in verdict.attrs["class"].split()  # the report did not pass


def test_related_charts_share_a_row_that_wraps(spectrum: Report, rank: Report) -> None:
    rules = css(render_html(spectrum))
    assert "flex-wrap:wrap" in rules["div.pair"] and "flex:1 1 100%" in rules["div.pair>figure.fig"]
    for report, ids in (
        (spectrum, ("chart-layers-kappa", "chart-layers-mu")),
        (rank, ("curves-plain", "curves-cond", "heat-plain", "heat-cond")),
    ):
        tree = parse(render_html(report))
        pair = next(
            d for d in tree.iter("div") if "pair" in d.attrs.get("class", "").split() and ids[0] in str_ids(d)
        )
        assert set(ids) <= str_ids(pair)
        for chart_id in ids:  # scaled by its viewBox, never cropped
            svg = tree.by_id(chart_id)
            assert svg.attrs["viewbox"].split()[2] == svg.attrs["width"]


def str_ids(node: Node) -> set[str]:
    return {n.attrs["id"] for n in node.iter() if "id" in n.attrs}


def rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def lab(color: str) -> np.ndarray:
    """CIELAB (D65) of a hex colour: L* is lightness, distances are perceived differences (ΔE)."""
    c = rgb(color) / 255
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ c
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_rank_layer_colours_are_the_pngs_and_tell_early_layers_apart(rank: Report) -> None:
    from matplotlib.colors import to_hex

    svg = parse(render_html(rank)).by_id("curves-plain")
    page = {
        g.attrs["data-name"]: next(g.iter("polyline")).attrs["stroke"]
        for g in svg.iter("g")
        if "series" in g.attrs.get("class", "").split()
    }
    ax = plots.rank_curves_figure(rank).axes[0]
    png = {
        shown(str(line.get_label())): to_hex(line.get_color())
        for line in ax.get_lines()
        if "layer" in str(line.get_label())
    }
    assert set(page) == set(png)
    for name, color in png.items():  # the page samples the colormap at 17 stops
        assert np.abs(rgb(page[name]) - rgb(color)).max() <= 6, (name, page[name], color)
    # layers 0 and 1 no longer share one near-black colour: the first is a visible colour, the second
    # clearly another (full viridis: L* 15 and ΔE 28 for six layers; ΔE 27 now that the yellow end, which
    # vanishes on white, is left out)
    first, second = (lab(png[f"layer {layer['index']}"]) for layer in rank["rank_decay"]["layers"][:2])
    assert first[0] >= 25 and math.dist(first, second) >= 25


def test_one_number_formatter_for_the_cli_tables_and_the_page() -> None:
    import condcli.cli.tables as cli_tables
    import condcli.html.numbers as page_numbers
    import condcli.numbers as shared

    assert cli_tables.measured is shared.measured and cli_tables.floor_num is shared.floor_num
    import condcli.html.tables as page_tables

    assert page_tables.measured is shared.measured  # the digits a capture supports, one rule for both
    assert page_numbers.floor_num is shared.floor_num and cli_tables.WARN == page_numbers.WARN == "⚠"
    for v in (151.234, 0.0636, 1.45e3, 2.66e10, math.inf, -math.inf):
        assert page_numbers.num(v) == shared.num(v) == sig3(v)
    assert page_numbers.num(math.nan) == page_numbers.num(None) == shared.num(None) == "—"
