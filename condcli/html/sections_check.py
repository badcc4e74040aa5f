"""The sections of a ``check`` report: the verdict, every rule with PASS or FAIL, each regressed metric
against the baseline, then the analysis behind them (a check report is a spectrum report with the checks).

Everything is read from the report's JSON (``checks``, ``baseline``), so a saved report renders as it was
made; a part an older report lacks becomes a note (:func:`guarded`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from condcli.html.numbers import WARN, num, to_float
from condcli.html.section import Report, Section, guarded
from condcli.html.tables import Cell, key_values, number, table
from condcli.numbers import fmt_pair


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
    """Value and limit printed so that they never look equal unless they are (the CLI table's rule)."""
    if value is None or limit is None:
        return num(value), num(limit)
    return fmt_pair(value, limit)


def layer_text(layer: object) -> str:
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
        # only a floor σ_1/tol (docs/math.md#spectra): the true value is at least this
        if c.get("floor") is True:
            shown_value = f"≥ {shown_value} {WARN}"
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
                layer_text(c.get("layer")),
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
                layer_text(c.get("layer")),
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
    from condcli.html.sections_weights import sections as weights_sections

    analysis = weights_sections if report.get("weights_only") is True else spectrum_sections
    return [
        guarded("check-verdict", "Check", lambda: verdict_html(report) + warnings_html(report)),
        guarded("check-rules", "Rules", lambda: rules_html(report)),
        guarded("check-baseline", "Baseline", lambda: baseline_html(report)),
        *analysis(report),
    ]


def sections(report: Report) -> list[Section]:
    """The sections of a ``check`` report."""
    return check_sections(report)
