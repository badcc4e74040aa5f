"""condcli.html.render_html on real reports of spectrum, sweep-lambda and rank-decay: the page shows the
report's numbers (each table cell's data-value is the JSON value to full precision, its text the CLI's
rounding), names every layer, references nothing external, escapes every string, and renders older or
partial reports (keys deleted) without an error."""

from __future__ import annotations

import copy
import html
import json
import math
import re
from collections.abc import Iterator
from typing import Any

import pytest

from condcli.errors import InputError
from condcli.html import SECTIONS, render_html
from condcli.reports.metrics import FORWARD, WEIGHTS
from tests.html_dom import Node, parse
from tests.html_reports import LAM, jf, sig3

Report = dict[str, Any]


@pytest.fixture(scope="module")
def reports(spectrum: Report, sweep: Report, rank: Report) -> dict[str, Report]:
    return {"spectrum": spectrum, "sweep-lambda": sweep, "rank-decay": rank}


def shown(label: str) -> str:
    """A label as the page's text reads it: subscripts and superscripts set as HTML (κ(X<sub>ℓ</sub>)),
    so their markers are gone (condcli.figures.labels.html_text)."""
    import re

    from condcli.figures.labels import html_text

    return html.unescape(re.sub(r"<[^>]+>", "", html_text(label)))


def rows(table: Node) -> tuple[list[str], list[list[Node]]]:
    head = [th.text() for th in table.iter("th")]
    body = [tr.direct("td") for tr in next(table.iter("tbody")).direct("tr")]
    return head, body


def check_cell(td: Node, value: Any, floor: bool = False, rel: Any = None) -> None:
    """The cell holds ``value`` (a JSON float) to full precision and shows it as the CLI rounds it: three
    significant digits, or, where its relative uncertainty ``rel`` (the JSON's) leaves the third digit
    unsupported, "≈" and fewer digits that still lie within [v/(1+r), v/(1−r)] (docs/math.md)."""
    v = jf(value)
    assert float(td.attrs["data-value"]) == v, (td.attrs, value)
    text = td.text()
    if floor:
        assert text.startswith("≥ ") and text.endswith("⚠"), text
        return
    shown = text.split(" ")[0]
    if not shown.startswith("≈"):
        assert shown == sig3(v), (text, v)
        return
    r = jf(rel)
    spread = abs(v) * r / (1 - r)
    assert spread >= 10 ** (math.floor(math.log10(abs(v))) - 2), (text, v, r)  # 3 digits would claim more
    approx = float(shown.removeprefix("≈"))
    assert len(shown.removeprefix("≈").split("e")[0].replace(".", "")) < 3
    assert v / (1 + r) <= approx * (1 + 1e-12) and approx <= v / (1 - r) * (1 + 1e-12), (text, v, r)


def rel_of(agg: Report, statistic: str) -> Any:
    """The JSON's relative uncertainty of a statistic (None where the aggregate has none)."""
    return (agg.get("rel_uncertainty") or {}).get(statistic)


def test_dispatch_table_names_every_command() -> None:
    assert set(SECTIONS) >= {"spectrum", "sweep-lambda", "rank-decay", "check", "compare", "track"}


@pytest.mark.parametrize("bad", [{"command": "nope"}, {}, {"command": 3}, [1, 2], "spectrum"])
def test_not_a_report_of_a_known_command_is_one_input_error(bad: Any) -> None:
    with pytest.raises(InputError) as err:
        render_html(bad)
    assert "\n" not in str(err.value) and " — " in str(err.value)


def test_spectrum_page_shows_x_and_every_layer(spectrum: Report) -> None:
    page = parse(render_html(spectrum))
    emb = spectrum["embedding"]
    head, body = rows(page.by_id("table-embedding"))
    assert head == ["quantity", "median", "min", "max", "note"]
    by_label = {tr[0].text(): tr for tr in body}
    for key, label in (("kappa", "κ(X)"), ("kappa_corrected", "κ(X + C)"), ("sigma_min", "σ_min")):
        for col, stat in enumerate(("median", "min", "max"), start=1):
            agg = emb[key]
            check_cell(
                by_label[shown(label)][col],
                agg[stat],
                agg.get("floor", {}).get(stat, False),
                rel_of(agg, stat),
            )
    check_cell(by_label[shown(f"κ(X + {LAM:g}·I_k)")][1], emb["kappa_conditioned"]["median"])
    text = page.text()
    assert sig3(jf(emb["kappa"]["median"])) in text
    for layer in spectrum["layers"]:
        assert layer["name"] in text


def test_layer_table_cells_are_the_json_values(spectrum: Report) -> None:
    head, body = rows(parse(render_html(spectrum)).by_id("table-layers"))
    plain = {shown(m.column): m for m in (*FORWARD, *WEIGHTS) if m.column is not None}
    cond = {shown(f"{m.column} +{LAM:g}I"): m for m in FORWARD if m.conditioned_column}
    checked = 0
    assert len(body) == len(spectrum["layers"])
    for tr, layer in zip(body, spectrum["layers"], strict=True):
        assert float(tr[0].attrs["data-value"]) == layer["index"] and tr[1].text() == layer["name"]
        for col, td in zip(head[2:], tr[2:], strict=True):
            if col in plain and plain[col].scope == "weight":
                check_cell(td, layer[plain[col].key])
            else:
                src, m = (layer, plain[col]) if col in plain else (layer["conditioned"], cond[col])
                agg = src[m.key]
                if agg is None:
                    assert td.text() == "—"
                    continue
                check_cell(
                    td, agg["median"], agg.get("floor", {}).get("median", False), rel_of(agg, "median")
                )
                below = (agg.get("floor_count") or 0) > 0 or any(
                    src["below_precision"].get(f) for f in (m.flag,) if f is not None
                )
                assert td.text().endswith("⚠") == (below or agg.get("floor", {}).get("median", False))
            checked += 1
    assert checked >= len(spectrum["layers"]) * 10


def test_head_tables_hold_each_heads_medians(spectrum: Report) -> None:
    page = parse(render_html(spectrum))
    for layer in spectrum["layers"]:
        head, body = rows(page.by_id(f"table-heads-{layer['index']}"))
        assert head[:4] == ["head", *(shown(f"κ(W_{w}^h)") for w in "QKV")]
        for tr, h in zip(body, layer["heads_detail"], strict=True):
            check_cell(tr[1], layer["kappa_wq_heads"][h["head"]])
            check_cell(tr[3], layer["kappa_wv_heads"][h["head"]])
            mu_la = h["mu_la"]
            floor = mu_la.get("floor", {}).get("median", False)
            check_cell(tr[head.index(shown("μ(LA)"))], mu_la["median"], floor, rel_of(mu_la, "median"))
            check_cell(tr[head.index("κ(LA) actual")], h["kappa_la"]["median"])


def test_floor_and_warning_footnotes_only_where_they_occur(spectrum: Report) -> None:
    page = render_html(spectrum)
    has_floor = any(
        (layer[k] or {}).get("floor", {}).get("median")
        for layer in spectrum["layers"]
        for k in ("mu_a", "kappa_probs")
    )
    assert ("only a floor" in page) == has_floor
    heads = parse(page).by_id("heads").text()  # one set of footnotes under all per-head tables
    assert heads.count("only a floor") <= 1 and heads.count("some samples of this quantity") <= 1
    quiet = copy.deepcopy(spectrum)
    for layer in quiet["layers"]:
        layer["heads_detail"] = None
        for src in (layer, layer["conditioned"]):
            for agg in src.values():
                if isinstance(agg, dict) and "floor" in agg:
                    agg["floor"] = {s: False for s in agg["floor"]}
                    agg["floor_count"] = 0
            src["below_precision"] = {k: 0 for k in src["below_precision"]}
    assert (
        "only a floor" not in render_html(quiet)
        and "⚠" not in parse(render_html(quiet)).by_id("table-layers").text()
    )


def test_sweep_table_and_recommendation(sweep: Report) -> None:
    page = parse(render_html(sweep))
    s = sweep["sweep"]
    head, body = rows(page.by_id("table-sweep"))
    assert head == ["λ", "κ median", "κ p10", "κ p90", "Weyl bound", "supplement est.", "note"]
    assert len(body) == len(s["lambdas"])
    for i, tr in enumerate(body):
        assert float(tr[0].attrs["data-value"]) == jf(s["lambdas"][i])
        check_cell(tr[1], s["kappa"]["median"][i])
        check_cell(tr[2], s["kappa"]["p10"][i])
        weyl = jf(s["weyl_bound"][i])
        assert float(tr[4].attrs["data-value"]) == weyl
        assert (tr[4].text() == "none") == (weyl == float("inf"))
        assert ("recommended" in tr[6].text()) == (jf(s["lambdas"][i]) == jf(s["recommended_lambda"]))
    body = rows(page.by_id("table-sweep-layers"))[1]
    for tr, layer in zip(body, s["layers"], strict=True):
        assert tr[1].text() == layer["name"]
        check_cell(tr[2], layer["kappa_plain_median"])
        for td, v in zip(tr[3:], layer["kappa_median"], strict=True):
            check_cell(td, v)


def test_rank_table_and_heatmap(rank: Report) -> None:
    page = parse(render_html(rank))
    head, body = rows(page.by_id("table-rank"))
    want = ("c_m", "erank", f"c_m +{LAM:g}I", f"erank +{LAM:g}I")
    assert (head[3], head[6], head[7], head[10]) == tuple(shown(w) for w in want)
    plain, cond = rank["rank_decay"], rank["rank_decay_conditioned"]
    for tr, layer, twin in zip(body, plain["layers"], cond["layers"], strict=True):
        assert tr[1].text() == layer["name"]
        for offset, src in ((3, layer), (7, twin)):
            assert float(tr[offset].attrs["data-value"]) == jf(src["at_m"]["median"])
            assert tr[offset].text() == f"{jf(src['at_m']['median']):.3f}"
            assert float(tr[offset + 1].attrs["data-value"]) == min(map(jf, src["heads_at_m"]))
            assert float(tr[offset + 2].attrs["data-value"]) == jf(src["rank90"]["median"])
            check_cell(tr[offset + 3], src["erank"]["median"])
    for suffix, section in (("plain", plain), ("cond", cond)):
        cells = [r for r in page.by_id(f"heat-{suffix}").iter("rect") if "data-row" in r.attrs]
        expected = {
            (i, j): jf(v)
            for i, layer in enumerate(section["layers"])
            for j, v in enumerate(layer["heads_at_m"])
        }
        got = {
            (int(r.attrs["data-row"]), int(r.attrs["data-col"])): float(r.attrs["data-value"]) for r in cells
        }
        assert got == expected
    for layer in plain["layers"]:
        body = rows(page.by_id(f"table-heads-plain-{layer['index']}"))[1]
        for tr, h in zip(body, layer["heads_detail"], strict=True):
            assert float(tr[1].attrs["data-value"]) == jf(h["at_m"]["median"])
            check_cell(tr[3], h["erank"]["median"])


EXTERNAL = re.compile(r"https?:|//|@import|\bsrc\s*=|\bhref\s*=\s*(?![\"']?#)|url\((?!\s*['\"]?data:)", re.I)


def test_pages_reference_nothing_external(reports: dict[str, Report]) -> None:
    for report in reports.values():
        page = render_html(report)
        found = EXTERNAL.findall(page)
        assert not found, found[:5]
        tree = parse(page)
        assert [n.tag for n in tree.iter() if n.tag in ("link", "img", "iframe", "object", "embed")] == []
        assert len(list(tree.iter("script"))) == 1 and len(list(tree.iter("style"))) == 1


HOSTILE = "<script>alert('x')</script>\"'&lt;<img src=x onerror=alert(1)>"


def test_report_strings_are_escaped(spectrum: Report, rank: Report) -> None:
    for report in (spectrum, rank):
        bad = copy.deepcopy(report)
        bad["model"]["spec"] = HOSTILE
        bad["inputs"]["description"] = HOSTILE
        bad["embedding"]["where"] = HOSTILE
        bad["notes"] = [HOSTILE]
        layers = bad["layers"] if "layers" in bad else bad["rank_decay"]["layers"]
        layers[0]["name"] = HOSTILE
        page = render_html(bad)
        tree = parse(page)
        assert len(list(tree.iter("script"))) == 1 and not list(tree.iter("img"))
        assert HOSTILE in tree.text()  # shown as text, literally
        assert "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")


# Keys of an aggregate that a page reads like their siblings: one of each kind is deleted, not all.
SAME_AS_SIBLING = {"mean", "min", "per_sample", "inf_count", "per_sample_floor", "count", "p10", "matrices"}


def paths(value: Any, prefix: tuple[Any, ...] = (), depth: int = 4) -> Iterator[tuple[Any, ...]]:
    """Every key path of a report (lists entered at their first element), down to ``depth``."""
    if depth == 0:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if k in SAME_AS_SIBLING and len(prefix) > 2:
                continue
            yield (*prefix, k)
            yield from paths(v, (*prefix, k), depth - 1)
    elif isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        yield from paths(value[0], (*prefix, 0), depth - 1)


def without(report: Report, path: tuple[Any, ...], replacement: str) -> Report:
    out: Report = json.loads(json.dumps(report))
    parent = out
    for k in path[:-1]:
        parent = parent[k]
    if replacement == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = None
    return out


def slim(value: Any) -> Any:
    """The report with every list cut to its first 3 items (layers, heads, spectra, samples): the same
    keys and shapes, faster to render a few hundred times."""
    if isinstance(value, dict):
        return {k: slim(v) for k, v in value.items()}
    if isinstance(value, list):
        return [slim(v) for v in value[:3]]
    return value


@pytest.mark.parametrize("replacement", ["delete", "null"])
def test_older_or_partial_reports_render(reports: dict[str, Report], replacement: str) -> None:
    """Any key of any report deleted (or null), as an older schema may lack it: a page, never an error."""
    for report in reports.values():
        small = slim(report)
        for n, path in enumerate(paths(small)):
            if path != ("command",):
                page = render_html(without(small, path, replacement))
                if n % 8 == 0:  # well-formed (parsing all of them would double the time)
                    parse(page)
                assert page.endswith("</html>")


def test_missing_parts_say_so(spectrum: Report, sweep: Report, rank: Report) -> None:
    for report, key in (
        (spectrum, "embedding"),
        (spectrum, "layers"),
        (sweep, "sweep"),
        (rank, "rank_decay"),
    ):
        page = render_html(without(report, (key,), "delete"))
        assert "not in this report" in page
    minimal = render_html({"command": "spectrum"})
    assert "not in this report" in minimal


def test_glossary_lists_the_registry_metrics_the_report_holds(spectrum: Report, sweep: Report) -> None:
    from condcli.reports.metrics import ALL

    for report in (spectrum, sweep):
        page = parse(render_html(report))
        glossary = page.by_id("glossary")
        listed = [dt.text() for dt in glossary.iter("dt")]
        layers = report.get("layers") or []
        held = [
            m
            for m in ALL
            if (
                report["embedding"].get(m.key) is not None
                if m.scope == "embedding"
                else (report.get("embedding_table") or {}).get(m.key) is not None
                if m.scope == "table"
                else any(layer.get(m.key) is not None for layer in layers)
            )
        ]

        def median(v: Any) -> Any:
            return v.get("median") if isinstance(v, dict) else v

        # κ_distinct where no row repeats (a ViT) equals κ: the glossary leaves it out, as the tables do
        def same_as_its_metric(m: Any, report: Any = report, layers: Any = layers) -> bool:
            holders = [report["embedding"]] if m.scope == "embedding" else layers
            given = [h for h in holders if h.get(m.key) is not None]
            return all(median(h[m.key]) == median(h.get(m.shadow_of)) for h in given)

        held = [m for m in held if m.shadow_of is None or not same_as_its_metric(m)]
        assert listed == [shown(m.label) for m in held]
        text = " ".join(glossary.text().split())
        assert all(" ".join(shown(m.formula).split()) in text for m in held)
    assert len(listed) < len(ALL)  # the sweep report holds no per-layer metric


def test_per_head_heatmaps_hold_each_heads_median(spectrum: Report) -> None:
    page = parse(render_html(spectrum))
    for key in ("mu_la", "mu_a"):
        cells = {
            (int(r.attrs["data-row"]), int(r.attrs["data-col"])): float(r.attrs["data-value"])
            for r in page.by_id(f"heat-{key}").iter("rect")
            if "data-row" in r.attrs
        }
        want = {
            (i, h["head"]): jf(h[key]["median"])
            for i, layer in enumerate(spectrum["layers"])
            for h in layer["heads_detail"]
        }
        assert cells == want
