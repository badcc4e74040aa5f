"""What ``condcli compare`` prints: both models, X's condition numbers and every layer's, A → B (B/A)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.flags import as_flags
from condcli.cli.tables import Col, fits, fitted, header, quiet
from condcli.gate.matching import SEEN
from condcli.gate.report import CompareReport, CompareRow, fmt
from condcli.numbers import WARN
from condcli.reports.metrics import EMBEDDING, FORWARD, WEIGHTS, MetricDef
from condcli.reports.reading import counted


def _value(v: float, floor: bool) -> str:
    return fmt(v) + (f" {WARN}" if floor else "")


def _ratio(r: CompareRow) -> str:
    return "—" if r.ratio is None else f"{fmt(r.ratio)}"


def embedding_table(report: CompareReport) -> Table:
    table = Table(
        "X",
        f"A {escape(str(report.a['model']['spec']))}",
        f"B {escape(str(report.b['model']['spec']))}",
        "B/A",
        title=f"X: {report.statistic} over samples",
        title_justify="left",
    )
    rows = [r for r in report.rows if r.layer is None]
    for r in rows:
        if _shadowed(r, rows):
            continue
        label = "κ of the tokens the blocks see" if r.key == SEEN else r.label
        a, b = _value(r.a, r.floor_a), _value(r.b, r.floor_b)
        if r.key == SEEN:
            a, b = f"{a} = {r.label_a.split(',')[0]}", f"{b} = {r.label_b.split(',')[0]}"
        table.add_row(escape(label), escape(a), escape(b), _ratio(r))
    return table


def _pair(r: CompareRow | None) -> tuple[str, str]:
    if r is None:
        return "—", "—"
    return escape(f"{_value(r.a, r.floor_a)} → {_value(r.b, r.floor_b)}"), _ratio(r)


def _shadowed(r: CompareRow, rows: list[CompareRow]) -> bool:
    """A shadow metric's row (κ_distinct) says nothing new where it equals its metric's on both sides."""
    key = r.key.rsplit(".", 1)[-1]
    scope = EMBEDDING if r.layer is None else FORWARD
    shadow = next((m.shadow_of for m in scope if m.key == key), None)
    if shadow is None:
        return False
    twin = r.key.rsplit(".", 1)[0] + "." + shadow
    other = next((o for o in rows if o.key == twin), None)
    return other is not None and (other.a, other.b) == (r.a, r.b)


def _metric_key(r: CompareRow) -> str:
    """ "layers[3].conditioned.mu_la" → "conditioned.mu_la": the row's metric within its layer."""
    return r.key.split(".", 1)[1]


def layer_table(
    report: CompareReport, metrics: list[MetricDef], section: str, title: str, width: int = 200
) -> list[Table]:
    """Rows: the layers both have; per metric an "A → B" column and a B/A column, folded into as many tables
    as ``width`` needs (each repeats the layer column; no cell is cut).

    ``section``: "" for the plain forward and the weights, "conditioned." for the conditioned forward.
    """
    keys = [section + m.key for m in metrics]
    rows = [r for r in report.rows if r.layer is not None and _metric_key(r) in keys]
    if not rows:
        return []
    shown = [
        m for m in metrics if any(_metric_key(r) == section + m.key and not _shadowed(r, rows) for r in rows)
    ]
    layers = sorted({r.layer for r in rows if r.layer is not None})
    names, pairs = [], {m.key: ([], []) for m in shown}  # type: ignore[var-annotated]
    for index in layers:
        mine = {_metric_key(r): r for r in rows if r.layer == index}
        first = next(iter(mine.values()))
        name = first.name_a if first.name_a == first.name_b else f"{first.name_a} / {first.name_b}"
        names.append(escape(f"{index} {name}"))
        for m in shown:
            ab, ratio = _pair(mine.get(section + m.key))
            pairs[m.key][0].append(ab)
            pairs[m.key][1].append(ratio)
    layer = Col("layer", names)
    groups: list[list[Col]] = [[]]
    for m in shown:
        cols = [Col(f"{m.label} A → B", pairs[m.key][0]), Col("B/A", pairs[m.key][1])]
        if groups[-1] and not fits([layer, *groups[-1], *cols], width):
            groups.append([])
        groups[-1] += cols
    return [
        fitted(
            [layer, *g],
            width,
            title=title + (f" ({i + 1}/{len(groups)})" if len(groups) > 1 else ""),
            title_justify="left",
        )[0]
        for i, g in enumerate(groups)
    ]


def layer_tables(report: CompareReport, width: int = 200) -> list[Table]:
    """κ and μ (higher is worse) and H(P) and the stable rank (lower is worse) in tables of their own, for
    the plain forward, the weights and the conditioned forward."""
    stat = report.statistic
    higher = [m for m in FORWARD if m.worse == "higher"]
    lower = [m for m in FORWARD if m.worse == "lower"]
    lower_names = " and ".join(m.label for m in lower)
    conditioned = "conditioned forward: X + λ·I_k fed on"
    specs = [
        (higher, "", f"layers, plain forward ({stat} over samples; μ: max over heads)"),
        (lower, "", f"layers, plain forward: {lower_names}, lower is worse ({stat} over samples)"),
        (list(WEIGHTS), "", "layers, projection weights (whole d × H·d_h matrices, model constants)"),
        (higher, "conditioned.", f"layers, {conditioned} ({stat} over samples)"),
        (lower, "conditioned.", f"layers, {conditioned}: {lower_names} ({stat} over samples)"),
    ]
    return [
        t for metrics, section, title in specs for t in layer_table(report, metrics, section, title, width)
    ]


def saved_header(out: Console, data: dict[str, Any], path: str | None) -> None:
    """The header of a saved report's side: what :func:`header` prints of a run, from its JSON."""
    model, inputs = data.get("model") or {}, data.get("inputs") or {}
    where = f"saved report {path}" if path else "saved report"
    label = model.get("weights_label") or model.get("weights")
    out.print(
        f"[bold]{escape(str(model.get('spec')))}[/] ({escape(where)}): {escape(str(model.get('family')))}, "
        f"{escape(str(model.get('source')))}, {escape(str(label))}, {model.get('num_layers')} layers"
    )
    if inputs:
        shape = f"up to {inputs.get('tokens')} tokens × d {inputs.get('dim')}"
        described = as_flags(str(inputs.get("description")))
        out.print(escape(f"inputs: {counted(inputs.get('count'), None)} — {described}; {shape}"))


def render(
    out: Console, report: CompareReport, saved_from: tuple[str | None, str | None] = (None, None)
) -> None:
    """The tables; ``saved_from``: the file each saved report side was read from."""
    sides = zip("AB", report.spectra, (report.a, report.b), saved_from, strict=True)
    for side, r, data, path in sides:
        if r is not None:
            header(out, r.model, r.inputs, prefix=f"[bold]{side}[/] ")
        elif not quiet():
            out.print(f"[bold]{side}[/] ", end="")
            saved_header(out, data, path)
    out.print(embedding_table(report))
    for table in layer_tables(report, out.width):
        out.print(table)
    if any(r.floor_a or r.floor_b for r in report.rows):
        out.print(f"{WARN}: some samples below the capture dtype's resolution: the value is a floor.")
