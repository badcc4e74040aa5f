"""What ``condcli sweep-lambda`` prints: κ(X + λI_k) per λ with bounds and chosen layers, then the verdict."""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.flags import as_flags
from condcli.cli.tables import header, notes, quiet
from condcli.numbers import WARN, num
from condcli.reports.sweep import SweepReport


def _bound(v: float) -> str:
    return "none" if math.isinf(v) else num(v)


def sweep_table(report: SweepReport) -> Table:
    s = report.sweep
    cols = ["λ", "κ median", "κ p10", "κ p90", "Weyl bound", "supplement est."]
    for layer in s.layers or ():
        cols.append(f"κ(X_{layer.index}) {layer.name}")
    cols.append("note")
    title = (
        f"κ(X + λ·I_k) over {report.inputs.count} samples (exact, per sample; target κ ≤ {s.target_kappa:g})"
    )
    table = Table(*cols, title=title, title_justify="left")
    for j, lam in enumerate(s.lambdas):
        row = [
            f"{lam:g}",
            num(s.kappa_median[j]),
            num(s.kappa_p10[j]),
            num(s.kappa_p90[j]),
            _bound(s.weyl_bound[j]),
            _bound(s.supplement_estimate[j]),
        ]
        for layer in s.layers or ():
            row.append(num(layer.kappa_median[j]) + (f" {WARN}" if layer.below_precision[j] else ""))
        notes = []
        if s.recommended_lambda is not None and lam == s.recommended_lambda:
            notes.append("◀ recommended")
        if s.kappa_inf_count[j]:
            notes.append(f"{s.kappa_inf_count[j]} sample(s) numerically singular")
        row.append("; ".join(notes))
        table.add_row(*row, style="bold green" if lam == s.recommended_lambda else None)
    return table


def render(out: Console, report: SweepReport) -> None:
    header(out, report.model, report.inputs)
    e, s = report.embedding, report.sweep
    pe = "" if e.after_position_encoding else ", no position encoding"
    out.print(escape(f"X = {e.description} [{e.where}]{pe}"))
    out.print(sweep_table(report))
    if not quiet():
        out.print(
            "Weyl bound: the guaranteed (σ_1+λ)/(λ−σ_1), 'none' where λ ≤ σ_1; supplement est.: the paper's "
            "(σ_1+λ)/(λ−σ_k), an estimate, not a bound (medians over samples)."
        )
    below = len(e.below_precision_samples)
    flag = (
        f" {WARN} {below}/{report.inputs.count} samples below {e.resolution_dtype} resolution"
        if below
        else ""
    )
    out.print(f"κ(X), no shift: median {num(s.kappa_plain)}{flag}")
    out.print(f"κ(X + C), Theorem 4.4 correction: median {num(s.kappa_corrected)} (≤ 2)")
    out.print(f"target: κ ≤ {s.target_kappa:g}")
    style = "bold green" if s.recommended_lambda is not None else "bold yellow"
    out.print(f"[{style}]recommended:[/] {escape(as_flags(s.recommendation))}")
    out.print(
        f"Weyl λ for the target: {num(s.weyl_lambda_for_target)} — from there on the Weyl bound guarantees "
        f"κ(X + λ·I_k) ≤ {s.target_kappa:g} (median over samples of σ_1(t+1)/(t−1))"
    )
    if s.layers:
        plain = ", ".join(
            f"{layer.index}: {num(layer.kappa_plain_median)}"
            + (f" {WARN}" if layer.below_precision_plain else "")
            for layer in s.layers
        )
        out.print(f"plain forward (no shift), median κ(X_l) per layer — {plain}")
        if any(any(layer.below_precision) or layer.below_precision_plain for layer in s.layers):
            out.print(f"{WARN} on κ(X_l): some samples below the capture dtype's resolution (κ is a floor).")
    notes(out, report.notes)
