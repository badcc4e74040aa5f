"""The tables ``condcli rank-decay`` prints: per layer c_m, rank at 90%, effective rank, spread over heads."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.flags import as_flags
from condcli.cli.tables import Col, dropped_line, fitted, header, notes, quiet, say, stat
from condcli.numbers import num
from condcli.reports.rank import MatrixAggregate, RankDecayReport, RankDecayResult, RankLayer


def _c(v: float) -> str:
    """A cumulative share: three decimals (c lives in (0, 1]; 3 significant digits would show 1 as 1)."""
    return f"{v:.3f}"


def _rank(a: MatrixAggregate, n: int) -> str:
    return f"{num(a.median)} / {n}"


def _m(result: RankDecayResult) -> str:
    return f"m = {result.index_m}" if result.index_m is not None else "m = round(n/4) per layer"


def layer_table(report: RankDecayReport, width: int = 200) -> tuple[Table, list[Col], str | None]:
    """The per-layer table fitted to ``width`` (the spread over heads and the conditioned erank go first);
    what P is, where every layer has the same, as one line for above the table (else a column)."""
    plain, cond = report.rank_decay, report.rank_decay_conditioned
    lam = f"{report.settings.lam:g}"
    shapes = [_shape(layer, plain) for layer in plain.layers]
    same = shapes[0] if shapes and len(set(shapes)) == 1 else None
    cells = [_cells(layer) for layer in plain.layers]
    cols = [Col("layer", [escape(f"{layer.index} {layer.name}") for layer in plain.layers])]
    if same is None:
        cols.append(Col("P", [escape(s) for s in shapes], rank=7, wrap=True))
    cols += [
        Col("c_m", [c[0] for c in cells]),
        Col("heads min–max", [c[1] for c in cells], rank=5),
        Col("rank 90%", [c[2] for c in cells], rank=1),
        Col("erank", [c[3] for c in cells], rank=3),
    ]
    if cond is not None:
        conditioned = {layer.index: layer for layer in cond.layers}
        other = [
            _cells(conditioned[layer.index]) if layer.index in conditioned else ["—"] * 4
            for layer in plain.layers
        ]
        cols += [
            Col(f"c_m +{lam}I", [c[0] for c in other]),
            Col(f"heads +{lam}I", [c[1] for c in other], rank=6),
            Col(f"rank 90% +{lam}I", [c[2] for c in other], rank=2),
            Col(f"erank +{lam}I", [c[3] for c in other], rank=4),
        ]
    title = (
        f"rank decay of P per layer ({_m(plain)}; medians over samples × windows × heads; "
        "c_m: share of Σσ in the m largest σ)"
    )
    table, dropped = fitted(cols, width, title=escape(title), title_justify="left")
    return table, dropped, None if same is None else f"P: {same} in every layer"


def _shape(layer: RankLayer, result: RankDecayResult) -> str:
    m = f", m = {layer.index_m}" if result.index_m is None else ""  # else the title says it
    return f"{layer.attention}, n = {layer.n}{m}"


def _cells(layer: RankLayer) -> list[str]:
    spread = f"{_c(min(layer.heads_at_m))}–{_c(max(layer.heads_at_m))}"
    return [_c(layer.at_m.median), spread, _rank(layer.rank90, layer.n), num(layer.erank.median)]


def heads_table(layer: RankLayer, other: RankLayer | None, lam: str) -> Table:
    cols = ["head", f"c_{layer.index_m}", "rank 90%", "erank"]
    if other is not None:
        cols += [f"c_{layer.index_m} +{lam}I", f"rank 90% +{lam}I", f"erank +{lam}I"]
    table = Table(
        *cols,
        title=escape(f"layer {layer.index} {layer.name}: per head (medians over samples and windows)"),
        title_justify="left",
    )
    theirs = {h.head: h for h in (other.heads_detail or ())} if other is not None else {}
    for h in layer.heads_detail or ():
        row = [str(h.head), _c(h.at_m.median), _rank(h.rank90, layer.n), num(h.erank.median)]
        o = theirs.get(h.head)
        if o is not None:
            row += [_c(o.at_m.median), _rank(o.rank90, layer.n), num(o.erank.median)]
        table.add_row(*row)
    return table


def render(out: Console, report: RankDecayReport) -> None:
    header(out, report.model, report.inputs)
    e, lam = report.embedding, f"{report.settings.lam:g}"
    out.print(
        escape(
            f"X: median κ(X) {stat(e.kappa, 'median')}, κ(X + {lam}·I_k) {num(e.kappa_conditioned.median)} "
            f"[{e.where}]"
        )
    )
    table, dropped, same = layer_table(report, out.width)
    if same is not None:
        say(out, escape(same))
    out.print(table)
    cond = report.rank_decay_conditioned
    conditioned = {layer.index: layer for layer in cond.layers} if cond is not None else {}
    for layer in report.rank_decay.layers:
        if layer.heads_detail is not None:
            out.print(heads_table(layer, conditioned.get(layer.index), lam))
    dropped_line(out, dropped)
    if quiet():
        return
    out.print(
        "c_m near 1 with a small rank 90% is a low-rank P (Linformer); erank is RankMe's effective rank "
        "exp(−Σ p_i log p_i), p_i = σ_i/Σσ."
    )
    cf = report.conditioned_forward
    if cf.applied:
        out.print(escape(f"+{lam}I: the same forward with {cf.conditioning} fed to the blocks"))
    elif cf.reason:
        out.print(escape(f"conditioned forward ({cf.conditioning}): not run — {as_flags(cf.reason)}"))
    notes(out, report.notes)
