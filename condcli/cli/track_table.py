"""The tables ``condcli track`` prints: one row per checkpoint (its training step), κ(X) and the layers.

The first table has κ(X) and, for the first and the last chosen layer, κ(X_l), μ(LA) and H(P); with more
than two layers chosen, one table per metric follows with a column per layer.
"""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.tables import Col, fits, fitted, header, median, notes, quiet
from condcli.numbers import WARN
from condcli.reports.metrics import EMBEDDING, HEADLINE, MetricDef
from condcli.reports.spectrum import LayerReport, SpectrumReport
from condcli.reports.track import TrackReport

METRICS: tuple[MetricDef, ...] = HEADLINE
OWN_WEIGHTS = "each checkpoint's own"  # the header's "… weights": what each checkpoint folder holds
KAPPA_X = next(m for m in EMBEDDING if m.key == "kappa")


def _kappa_x(report: SpectrumReport) -> str:
    e = report.embedding
    return median(e.kappa, len(e.below_precision_samples))


def _cell(layer: LayerReport, metric: MetricDef) -> str:
    return median(layer.plain[metric.key], layer.plain.below_of(metric))


def _layers(report: TrackReport) -> list[LayerReport]:
    return list(report.first.layers)


def main_table(report: TrackReport) -> Table:
    """step, κ(X), then κ(X_l), μ(LA) and H(P) of the first and the last chosen layer."""
    layers = _layers(report)
    shown = layers if len(layers) <= 2 else [layers[0], layers[-1]]
    cols = ["step", KAPPA_X.label, *(f"{m.label} [{layer.index}]" for layer in shown for m in METRICS)]
    title = "against the training step (medians over samples; μ: max over heads; H: lowest head)"
    table = Table(*cols, title=title, title_justify="left")
    for point in report.points:
        by_index = {layer.index: layer for layer in point.report.layers}
        cells = [_cell(by_index[layer.index], m) for layer in shown for m in METRICS]
        table.add_row(str(point.step), _kappa_x(point.report), *cells)
    return table


def metric_table(report: TrackReport, metric: MetricDef, width: int = 200) -> list[Table]:
    """One metric of every chosen layer (columns) against the step (rows), folded into as many tables as
    ``width`` needs (each repeats the step column)."""
    indices = [layer.index for layer in _layers(report)]
    title = f"{metric.label} per layer [index] against the training step (medians over samples)"
    step = Col("step", [str(point.step) for point in report.points])
    cols = []
    for i in indices:
        cells = [_cell({x.index: x for x in p.report.layers}[i], metric) for p in report.points]
        cols.append(Col(f"[{i}]", [escape(c) for c in cells]))
    groups: list[list[Col]] = [[]]
    for c in cols:
        if groups[-1] and not fits([step, *groups[-1], c], width):
            groups.append([])
        groups[-1].append(c)
    return [
        fitted([step, *g], width, title=escape(title) if i == 0 else None, title_justify="left")[0]
        for i, g in enumerate(groups)
    ]


def render(out: Console, report: TrackReport) -> None:
    first = report.first
    # each checkpoint's weights are what its folder holds: never "pretrained", whatever loading calls them
    header(out, replace(first.model, spec=" ".join(report.given), weights=OWN_WEIGHTS), first.inputs)
    named = {"folder name": "the folder names"}
    sources = sorted({named.get(p.step_from, p.step_from) for p in report.points})
    out.print(
        escape(
            f"{len(report.points)} checkpoint(s), steps {report.steps[0]} … {report.steps[-1]} "
            f"(from {' and '.join(sources)}); λ {first.settings.lam:g}"
        )
    )
    out.print(main_table(report))
    if len(first.layers) > 2:
        for metric in METRICS:
            for table in metric_table(report, metric, out.width):
                out.print(table)
    if first.layers and not quiet():
        out.print(
            "κ(X_l): the residual stream entering layer l; μ(LA) = κ(W_Q)κ(W_K)κ(W_V)κ(A_l)³, the worst "
            "head; H(P): normalised attention entropy (1 uniform, 0 collapsed), the lowest head."
        )
    if any(
        layer.plain.below.get("x") or layer.plain.below.get("attn_input")
        for p in report.points
        for layer in p.report.layers
    ):
        out.print(f"{WARN}: some samples below the capture dtype's resolution; '≥ value ⚠' is a floor.")
    for point in report.points:
        missing = [layer for layer in point.report.layers if layer.probs_note is not None]
        if missing:
            out.print(
                escape(
                    f"— H(P) in layer(s) {', '.join(str(m.index) for m in missing)}: {missing[0].probs_note}"
                )
            )
            break
    notes(out, report.notes)
