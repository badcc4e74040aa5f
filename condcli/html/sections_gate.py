"""The sections of ``check`` and ``compare`` reports: every rule with PASS or FAIL, each regressed metric
against the baseline; two models side by side with their B/A ratios.

Everything is read from the report's JSON (``checks``, ``baseline``, ``metrics``, ``a``, ``b``), so a saved
report renders as it was made; a part an older report lacks becomes a note (:func:`guarded`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from condcli.html.numbers import num, to_float
from condcli.html.section import Report, Section, guarded, missing
from condcli.html.svg import Chart, RefLine, Series, line_chart
from condcli.html.tables import Cell, key_values, number, table
from condcli.metrics import ALL

A_COLOR, B_COLOR = "#1f77b4", "#ff7f0e"  # blue A (the reference), orange B
RATIO_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
CONDITIONED = "conditioned."
GROUPS = (  # (within-layer prefix, title, which metrics): the parts of a layer's rows
    ("", "plain forward", "forward"),
    ("", "projection weights (model constants)", "weight"),
    (CONDITIONED, "conditioned forward (X + λ·I_k fed on)", "forward"),
)


def sections(report: Report) -> list[Section]:
    """The gate sections of a ``check`` or ``compare`` report (anything else: none)."""
    command = report.get("command")
    if command == "check":
        return check_sections(report)
    if command == "compare":
        return compare_sections(report)
    return []


# ---------------------------------------------------------------- check


def _checks(report: Report) -> list[Mapping[str, Any]]:
    checks = report["checks"]
    if not isinstance(checks, list):
        raise TypeError("checks is not a list")
    return [c for c in checks if isinstance(c, Mapping)]


def _result(passed: object, improved: object = False) -> Cell:
    if passed is True:
        return Cell(
            "improved" if improved is True else "PASS",
            title="improved by more than the tolerance" if improved is True else "",
            cls="pass",
        )
    return Cell("FAIL", cls="fail")


def _pair(value: float | None, limit: float | None) -> tuple[str, str]:
    """Value and limit printed so that they never look equal unless they are (as the CLI's table)."""
    if value is None or limit is None or value == limit:
        return num(value, 6 if value == limit else 3), num(limit, 6)
    for digits in range(3, 18):
        if num(value, digits) != num(limit, digits):
            return num(value, digits), num(limit, max(digits, 6) if digits == 3 else digits)
    return repr(value), repr(limit)


def _layer_text(layer: object) -> str:
    if not isinstance(layer, Mapping):
        return ""
    name = layer.get("name")
    if isinstance(name, Mapping):
        a, b = name.get("a"), name.get("b")
        name = a if a == b else f"{a} / {b}"
    return f"{layer.get('index')} {name}" if name else str(layer.get("index"))


def verdict_html(report: Report) -> str:
    """The verdict line: PASS or FAIL, how many rules passed and how many baseline metrics regressed."""
    checks = _checks(report)
    rules = [c for c in checks if c.get("rule") != "baseline"]
    failed = [str(c.get("rule")) for c in rules if c.get("passed") is not True]
    passed = report.get("passed")
    if not isinstance(passed, bool):
        passed = all(c.get("passed") is True for c in checks)
    parts = []
    if rules:
        parts.append(
            f"{len(rules) - len(failed)} of {len(rules)} rules passed"
            + (f" (failed: {', '.join(failed)})" if failed else "")
        )
    base = report.get("baseline")
    if isinstance(base, Mapping):
        parts.append(f"{base.get('regressed')} of {base.get('compared')} baseline metrics regressed")
    word, cls = ("check passed", "pass") if passed else ("check failed", "fail")
    stat = report.get("statistic")
    count = report.get("inputs", {}).get("count") if isinstance(report.get("inputs"), Mapping) else None
    over = f"{stat} over {count} samples" if stat and count is not None else str(stat or "")
    return (
        f'<p class="verdict {cls}" data-passed="{str(passed).lower()}">'
        f"<strong>{word}</strong>"
        f"{escape(': ' + '; '.join(parts)) if parts else ''}</p>"
        + (
            f"<p>Each rule is evaluated on the {escape(over)}; a layer rule on its worst analysed layer.</p>"
            if over
            else ""
        )
    )


def rules_html(report: Report) -> str:
    """Every rule: what it gates, value against limit, PASS or FAIL, the worst layer, why."""
    rules = [c for c in _checks(report) if c.get("rule") != "baseline"]
    if not rules:
        return "<p>No rules were set; only the baseline was compared.</p>"
    rows: list[list[Cell | str]] = []
    for c in rules:
        value, limit = to_float(c.get("value")), to_float(c.get("limit"))
        shown_value, shown_limit = _pair(value, limit)
        source = c.get("source")
        note = "; ".join(
            str(p)
            for p in (c.get("reason"), None if source == "command line" else f"limit from {source}")
            if p
        )
        rows.append(
            [
                str(c.get("rule")),
                str(c.get("label")),
                str(c.get("statistic")),
                Cell(shown_value, value),
                Cell(shown_limit, limit),
                _result(c.get("passed")),
                _layer_text(c.get("layer")),
                note,
            ]
        )
    columns = ["rule", "metric", "statistic", "value", "limit", "result", "worst layer", "note"]
    return table(columns, rows, table_id="check-rules-table")


def _baseline_rows(checks: Sequence[Mapping[str, Any]]) -> list[list[Cell | str]]:
    rows: list[list[Cell | str]] = []
    for c in checks:
        old, now, limit = (to_float(c.get(k)) for k in ("baseline", "value", "limit"))
        ratio = (
            None if not old or old is None or now is None or math.isinf(old) or math.isinf(now) else now / old
        )
        shown_now, shown_limit = _pair(now, limit)
        rows.append(
            [
                str(c.get("label")),
                _layer_text(c.get("layer")),
                number(old),
                Cell(shown_now, now),
                Cell(shown_limit, limit),
                number(ratio),
                _result(c.get("passed"), c.get("improved")),
            ]
        )
    return rows


def baseline_html(report: Report) -> str:
    """The baseline compared against, the metrics that regressed (then those that improved), and every
    compared metric behind a disclosure."""
    base = report["baseline"]
    if not isinstance(base, Mapping):
        return "<p>No baseline was compared in this check.</p>"
    compared, regressed, improved = (base.get(k) for k in ("compared", "regressed", "improved"))
    tolerance = to_float(base.get("tolerance"))
    counts = [v for v in (compared, regressed, improved) if isinstance(v, int)]
    within = counts[0] - counts[1] - counts[2] if len(counts) == 3 else None
    summary = key_values(
        [
            ("file", base.get("file")),
            ("model", base.get("model")),
            ("made by condcli", base.get("condcli_version")),
            ("tolerance", None if tolerance is None else f"{tolerance * 100:g}%"),
            ("metrics compared", compared),
            ("regressed (FAIL)", regressed),
            ("improved by more than the tolerance", improved),
            ("within the tolerance", within),
        ]
    )
    checks = [c for c in _checks(report) if c.get("rule") == "baseline"]
    bad = [c for c in checks if c.get("passed") is not True]
    good = [c for c in checks if c.get("passed") is True and c.get("improved") is True]
    columns = ["metric", "layer", "baseline", "now", "limit", "now/baseline", "result"]
    note = (
        "A metric regresses when it is worse than the baseline by more than the tolerance (the limit is the "
        "baseline × (1 ± tolerance), by which way the metric is worse); improvements never fail."
    )
    parts = [summary, f"<p>{escape(note)}</p>"]
    if bad or good:
        title = f"{len(bad)} regressed, {len(good)} improved"
        parts.append(table(columns, _baseline_rows(bad + good), caption=title, table_id="check-regressed"))
    else:
        parts.append("<p>No metric regressed or improved by more than the tolerance.</p>")
    if checks:
        parts.append(
            f"<details><summary>all {len(checks)} compared metrics</summary>"
            + table(columns, _baseline_rows(checks), table_id="check-baseline-all")
            + "</details>"
        )
    return "".join(parts)


def warnings_html(report: Report) -> str:
    warnings = report.get("warnings")
    if not isinstance(warnings, list) or not warnings:
        return ""
    items = "".join(f"<li>{escape(str(w))}</li>" for w in warnings)
    return f'<ul class="warnings">{items}</ul>'


def check_sections(report: Report) -> list[Section]:
    """The verdict, the rules and the baseline of a check report, then its analysis (a check report is a
    spectrum report with the checks added)."""
    from condcli.html.sections_spectrum import sections as spectrum_sections

    return [
        guarded("check-verdict", "Check", lambda: verdict_html(report) + warnings_html(report)),
        guarded("check-rules", "Rules", lambda: rules_html(report)),
        guarded("check-baseline", "Baseline", lambda: baseline_html(report)),
        *spectrum_sections(report),
    ]


# ---------------------------------------------------------------- compare


def _rows(report: Report) -> list[Mapping[str, Any]]:
    rows = report["metrics"]
    if not isinstance(rows, list):
        raise TypeError("metrics is not a list")
    return [r for r in rows if isinstance(r, Mapping) and isinstance(r.get("metric"), str)]


def worse_direction(key: str) -> str | None:
    """'higher' or 'lower': which way the metric at ``key`` (``embedding.kappa``, ``layers[3].mu_la``,
    ``layers[3].conditioned.mu_la``, ``embedding.seen``) is worse; None when the registry does not know it."""
    scope, _, rest = key.partition(".")
    if key == "embedding.seen":
        return "higher"
    rest = rest.removeprefix(CONDITIONED)
    want = ("embedding",) if scope == "embedding" else ("forward", "weight")
    return next((m.worse for m in ALL if m.key == rest and m.scope in want), None)


def _trend(key: str, ratio: float | None) -> Cell:
    """Whether B is better or worse than A on this metric (within 1 %: about the same)."""
    worse = worse_direction(key)
    if ratio is None or worse is None or math.isnan(ratio):
        return Cell("—")
    if abs(ratio - 1) <= 0.01:
        return Cell("≈ same", ratio)
    better = ratio < 1 if worse == "higher" else ratio > 1
    arrow = "↓" if ratio < 1 else "↑"
    return Cell(f"{arrow} B {'better' if better else 'worse'}", ratio, title=f"{worse} is worse")


def _side_value(row: Mapping[str, Any], side: str) -> Cell:
    v = to_float(row.get(side))
    floor = row.get("floor")
    if isinstance(floor, Mapping) and floor.get(side) is True and v is not None:
        return Cell(f"≥ {num(v)} ⚠", v, ("floor",))
    return number(v)


def _model_pairs(side: Mapping[str, Any]) -> dict[str, str]:
    def get(section: str, key: str) -> Any:
        part = side.get(section)
        return part.get(key) if isinstance(part, Mapping) else None

    lam = to_float(get("settings", "lambda"))
    return {
        "model": str(get("model", "spec")),
        "family": str(get("model", "family")),
        "weights": f"{get('model', 'weights')} ({get('model', 'source')})",
        "layers": str(get("model", "num_layers")),
        "inputs": str(get("inputs", "description") or get("inputs", "kind")),
        "tokens × dim": f"{get('inputs', 'tokens')} × {get('inputs', 'dim')}",
        "X taken at": str(get("embedding", "where")),
        "λ": "—" if lam is None else f"{lam:g}",
        "dtype, device": f"{get('settings', 'dtype')}, {get('settings', 'device')}",
    }


def models_html(report: Report) -> str:
    """A and B side by side: what each model is, what it saw, how it was run; then the warnings."""
    a, b = report["a"], report["b"]
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        raise TypeError("a and b are not reports")
    left, right = _model_pairs(a), _model_pairs(b)
    rows: list[list[Cell | str]] = [[k, left[k], right[k]] for k in left]
    stat = report.get("statistic")
    intro = (
        f"<p>The same analysis of two models: A is the reference, ratios are B/A, each number the "
        f"{escape(str(stat))} over samples.</p>"
    )
    return intro + table(["", "A", "B"], rows, table_id="compare-models-table") + warnings_html(report)


def x_html(report: Report) -> str:
    """X's condition numbers of A and B and their ratio."""
    rows: list[list[Cell | str]] = []
    for r in _rows(report):
        if r.get("layer") is not None:
            continue
        ratio = to_float(r.get("ratio"))
        rows.append(
            [
                str(r.get("label")),
                _side_value(r, "a"),
                _side_value(r, "b"),
                number(ratio),
                _trend(str(r["metric"]), ratio),
            ]
        )
    if not rows:
        return missing("X's metrics")
    return table(["metric", "A", "B", "B/A", "B vs A"], rows, table_id="compare-x-table")


def _layer_rows(report: Report, prefix: str, scope: str) -> list[Mapping[str, Any]]:
    keys = {m.key for m in ALL if m.scope == scope}
    out = []
    for r in _rows(report):
        if not isinstance(r.get("layer"), Mapping):
            continue
        within = _within(r)
        if prefix and not within.startswith(prefix):
            continue
        if not prefix and within.startswith(CONDITIONED):
            continue
        if within.removeprefix(prefix) in keys:
            out.append(r)
    return out


def _label(r: Mapping[str, Any]) -> str:
    return str(r.get("label", "")).removesuffix(", conditioned")


def _index(r: Mapping[str, Any]) -> float:
    layer = r.get("layer")
    index = to_float(layer.get("index")) if isinstance(layer, Mapping) else None
    return math.nan if index is None else index


def _charts(report: Report) -> str:
    """κ(X_l) and μ(LA) of A and B per layer (the conditioned forward dashed), and every per-layer
    metric's B/A on one log axis (1: the same)."""
    out = []
    for key, label in (("kappa", "κ(X_l)"), ("mu_la", "μ(LA)")):
        series = []
        for prefix, dash, group, what in (
            ("", "", "plain", ""),
            (CONDITIONED, "6 4", "conditioned", ", conditioned"),
        ):
            rows = [r for r in _layer_rows(report, prefix, "forward") if _within(r) == prefix + key]
            if not rows:
                continue
            xs = [_index(r) for r in rows]
            for side, color in (("a", A_COLOR), ("b", B_COLOR)):
                ys = [to_float(r.get(side)) for r in rows]
                series.append(
                    Series(
                        f"{side.upper()}{what}",
                        xs,
                        [math.nan if y is None else y for y in ys],
                        color,
                        dash=dash,
                        markers=True,
                        group=group if prefix else "",
                    )
                )
        if series:
            chart = Chart(f"{label} per layer: A and B", "layer", label, series)
            out.append(line_chart(chart, f"compare-chart-{key}"))
    ratios = []
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for r in _layer_rows(report, "", "forward"):
        by_label.setdefault(_label(r), []).append(r)
    for i, (label, rows) in enumerate(by_label.items()):
        xs = [_index(r) for r in rows]
        ys = [to_float(r.get("ratio")) for r in rows]
        ratios.append(
            Series(
                label,
                xs,
                [math.nan if y is None else y for y in ys],
                RATIO_COLORS[i % len(RATIO_COLORS)],
                markers=True,
            )
        )
    if ratios:
        chart = Chart(
            "B/A per layer, plain forward (below 1: B lower)",
            "layer",
            "B/A",
            ratios,
            refs=[RefLine(1.0, "B = A", "#555555")],
        )
        out.append(line_chart(chart, "compare-chart-ratios"))
    return f'<div class="pair">{"".join(out)}</div>' if out else ""


def _within(r: Mapping[str, Any]) -> str:
    key = str(r["metric"])
    return key.split(".", 1)[1] if "." in key else ""


def layers_html(report: Report) -> str:
    """Per-layer charts, then one sortable table per part (plain forward, weights, conditioned forward):
    layer, metric, A, B, B/A."""
    parts = [_charts(report)]
    for prefix, title, scope in GROUPS:
        rows = _layer_rows(report, prefix, scope)
        if not rows:
            continue
        cells: list[list[Cell | str]] = []
        for r in rows:
            ratio = to_float(r.get("ratio"))
            cells.append(
                [
                    _layer_text(r.get("layer")),
                    _label(r),
                    _side_value(r, "a"),
                    _side_value(r, "b"),
                    number(ratio),
                    _trend(str(r["metric"]), ratio),
                ]
            )
        parts.append(
            table(
                ["layer", "metric", "A", "B", "B/A", "B vs A"],
                cells,
                caption=f"layers, {title}",
                table_id=f"compare-layers-{scope}{'-conditioned' if prefix else ''}",
            )
        )
    if len(parts) == 1 and not parts[0]:
        return missing("per-layer metrics")
    return "".join(parts)


def compare_sections(report: Report) -> list[Section]:
    """A and B: the models, X's metrics, every layer's, with B/A ratios."""
    return [
        guarded("compare-models", "A and B", lambda: models_html(report)),
        guarded("compare-x", "X: A and B", lambda: x_html(report)),
        guarded("compare-layers", "Layers: A and B", lambda: layers_html(report)),
    ]
