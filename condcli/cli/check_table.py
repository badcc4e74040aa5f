"""What ``condcli check`` prints: the rules (value, limit, PASS/FAIL), the baseline's regressions and
improvements, and one verdict line; or, with --json, the report."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.flags import as_flags
from condcli.cli.tables import Col, fitted, header, notes, say, stdout_console
from condcli.gate.report import CheckReport, CheckResult, fmt, fmt_pair, percent

PASS, FAIL = "[green]PASS[/]", "[bold red]FAIL[/]"


def _where(c: CheckResult) -> str:
    return "" if c.layer is None else f"worst: layer {c.layer} {c.layer_name}"


def rules_table(report: CheckReport, width: int = 200) -> Table:
    """One row per rule, fitted to ``width``: text wraps at its words, no value or flag is cut."""
    rows = []
    for c in report.rules:
        value, limit = c.shown()
        metric = c.label if c.layer is None else f"{c.label.split(',')[0]}, {_where(c)}"
        source = "" if c.source == "command line" else f"limit from {c.source}"
        note = "; ".join(p for p in (c.reason or "", source) if p)
        rows.append(
            (c.rule, escape(metric), value, limit, PASS if c.passed else FAIL, escape(as_flags(note)))
        )
    heads = ("rule", "metric", "value", "limit", "result", "note")
    wraps = (False, True, False, False, False, True)
    cols = [Col(h, [r[i] for r in rows], wrap=w) for i, (h, w) in enumerate(zip(heads, wraps, strict=True))]
    return fitted(cols, width, title=_rules_title(report), title_justify="left")[0]


def baseline_table(report: CheckReport) -> Table | None:
    """Regressed metrics first, then the improved ones; None when neither happened."""
    checks = report.baseline_checks
    shown = [c for c in checks if not c.passed] + [c for c in checks if c.passed and c.improved]
    if not shown:
        return None
    table = Table("metric", "baseline", "now", "limit", "now/baseline", "result", title_justify="left")
    for c in shown:
        old = c.baseline if c.baseline is not None else float("nan")
        ratio = None if old == 0 or old == float("inf") or c.value == float("inf") else c.value / old
        now, limit = fmt_pair(c.value, c.limit)
        title = c.label if c.layer is None else f"layer {c.layer} {c.layer_name}: {c.label}"
        result = FAIL if not c.passed else "[cyan]improved[/]"
        table.add_row(escape(title), fmt(old), now, limit, fmt(ratio), result)
    return table


def verdict(report: CheckReport) -> str:
    rules = report.rules
    failed = [c.rule for c in rules if not c.passed]
    parts = []
    if rules:
        parts.append(
            f"{len(rules) - len(failed)} of {len(rules)} rules passed"
            + (f" (failed: {', '.join(failed)})" if failed else "")
        )
    b = report.baseline
    if b is not None:
        parts.append(f"{b.regressed} of {b.compared} baseline metrics regressed")
    word = "[green]check passed[/]" if report.passed else "[bold red]check failed[/]"
    return f"{word}: " + "; ".join(parts)


def show(report: CheckReport, *, as_json: bool) -> None:
    """The JSON report (stdout holds nothing else; the failed checks go to stderr) or the tables."""
    if not as_json:
        render(stdout_console(), report)
        return
    from condcli.cli.output import report_json

    print(report_json(report.to_json()))
    if not report.passed:
        print(f"check failed: {', '.join(c.title for c in report.checks if not c.passed)}", file=sys.stderr)


def _rules_title(report: CheckReport) -> str:
    inputs = report.data.get("inputs")
    if not isinstance(inputs, dict):  # the weights alone: no samples, each value a model constant
        return "rules (the weights alone: no inputs, no forward)"
    return f"rules ({report.statistic} over {inputs.get('count')} samples)"


def render(out: Console, report: CheckReport) -> None:
    if report.spectrum is not None:  # a saved report's analysis has no model to describe
        header(out, report.spectrum.model, report.spectrum.inputs)
    model = report.data.get("model")
    if report.data.get("weights_only") and isinstance(model, dict):
        say(
            out,
            f"[bold]{escape(str(model.get('spec')))}[/]: {escape(str(model.get('family')))}, "
            f"{escape(str(model.get('weights_label', '')))}, {model.get('num_layers')} layers — the weights "
            "alone (no inputs, no forward)",
        )
    if report.rules:
        out.print(rules_table(report, out.width))
    b = report.baseline
    if b is not None:
        made = f", condcli {b.version}" if b.version else ""
        within = b.compared - b.regressed - b.improved
        say(
            out,
            escape(
                f"baseline {b.path or 'given'} ({b.model}{made}), tolerance {percent(b.tolerance)}, "
                f"{report.statistic}: {b.compared} metrics compared — {b.regressed} regressed, "
                f"{b.improved} improved by more than the tolerance (not flagged), {within} within it"
            ),
        )
        table = baseline_table(report)
        if table is not None:
            out.print(table)
    notes(out, report.data.get("notes", ()))
    out.print(verdict(report))
