"""The tables ``condcli weights`` prints: the embedding table's κ and the output head, then one row per
layer (κ of W_Q, W_K, W_V, W_O and μ(LA)'s weight factor), and with ``--heads`` each layer's heads."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.tables import notes
from condcli.numbers import measured, num
from condcli.reports.table import EmbeddingTableReport, TableSpectrum
from condcli.reports.weights import LayerWeights, WeightsReport

FACTOR = "max_h κ(W_Q^h)κ(W_K^h)κ(W_V^h)"


def kappa_text(t: TableSpectrum) -> str:
    """κ of a stored matrix with the digits float64 resolution supports; "inf (rank r of k)" below it."""
    if t.kappa == float("inf"):
        return f"inf (rank {t.numerical_rank} of {len(t.spectrum)}: below float64 resolution)"
    return measured(t.kappa, t.rel_uncertainty)


def sigma_k_text(t: TableSpectrum) -> str:
    """σ_k, or "< resolution" where it is at or below float64's (docs/math.md#spectra-below-resolution)."""
    return f"< {num(t.resolution, 2)}" if t.sigma_min_ceiling else num(t.sigma_min)


def _matrix_line(label: str, t: TableSpectrum) -> str:
    v, d = t.shape
    return (
        f"{label} {t.name} {v} × {d}: κ = {kappa_text(t)} "
        f"(σ_1 {num(t.sigma_max)}, σ_k {sigma_k_text(t)}; {t.method})"
    )


def table_lines(e: EmbeddingTableReport) -> list[str]:
    """The embedding table and its output head, one line each."""
    lines = [_matrix_line("embedding table E", e.table)]
    if e.tied is None:
        lines.append("output head: none in this model")
    elif e.tied:
        lines.append("output head: tied to E (the same weights)")
    elif e.lm_head is not None:
        lines.append(_matrix_line("output head (untied)", e.lm_head))
    else:
        lines.append("output head: untied, its weights not loaded")
    return lines


def layer_table(layers: tuple[LayerWeights, ...]) -> Table:
    cols = ["layer", "name", "heads", "κ(W_Q)", "κ(W_K)", "κ(W_V)", "κ(W_O)", FACTOR, "Q/K/V"]
    title = "weights per layer (whole projections; the factor is μ(LA)'s without κ(A_l)³)"
    table = Table(*cols, title=escape(title), title_justify="left")
    for layer in layers:
        k = layer.kappas
        heads = str(layer.heads) if k.kv_heads in (None, layer.heads) else f"{layer.heads} / {k.kv_heads} KV"
        table.add_row(
            str(layer.index),
            escape(layer.name),
            heads,
            num(k.wq),
            num(k.wk),
            num(k.wv),
            num(layer.wo),
            num(layer.factor_max),
            escape(layer.qkv_source),
        )
    return table


def head_table(layer: LayerWeights) -> Table:
    k = layer.kappas
    cols = ["head", "κ(W_Q^h)", "κ(W_K^h)", "κ(W_V^h)", "κ(W_O^h)", "κ(W_Q^h)κ(W_K^h)κ(W_V^h)"]
    table = Table(*cols, title=escape(f"layer {layer.index} ({layer.name}) per head"), title_justify="left")
    wo = layer.wo_heads
    for h, f in enumerate(layer.factor_heads):
        row = (num(k.wq_heads[h]), num(k.wk_heads[h]), num(k.wv_heads[h]), num(None if wo is None else wo[h]))
        table.add_row(str(h), *row, num(f))
    return table


def render(out: Console, report: WeightsReport, heads: bool = False) -> None:
    m = report.model
    out.print(
        f"[bold]{escape(m.spec)}[/] ({escape(m.model_from)}): {escape(m.family)}, {m.source}, "
        f"{m.weights} weights, {m.num_layers} layers — weights only, no inputs"
    )
    if report.embedding_table is not None:
        for line in table_lines(report.embedding_table):
            out.print(escape(line))
    if report.layers:
        out.print(layer_table(report.layers))
        if heads:
            for layer in report.layers:
                out.print(head_table(layer))
    notes(out, report.notes)
