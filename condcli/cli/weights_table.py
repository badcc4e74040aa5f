"""The tables ``condcli weights`` prints: the embedding table's κ and the output head, then one row per
layer (κ of W_Q, W_K, W_V, W_O and μ(LA)'s weight factor), and with ``--heads`` each layer's heads."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.tables import Col, dropped_line, fitted, notes, quiet, say
from condcli.numbers import measured, num
from condcli.reports.table import EmbeddingTableReport, TableSpectrum
from condcli.reports.weights import LayerWeights, WeightsReport

FACTOR = "max_h κ(W_Q^h) κ(W_K^h) κ(W_V^h)"


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


def layer_table(layers: tuple[LayerWeights, ...], width: int = 200) -> tuple[Table, list[Col]]:
    """One row per layer, fitted to ``width``: the Q/K/V source, the name and W_O go first."""

    def heads(layer: LayerWeights) -> str:
        kv = layer.kappas.kv_heads
        return str(layer.heads) if kv in (None, layer.heads) else f"{layer.heads} / {kv} KV"

    cols = [
        Col("layer", [str(layer.index) for layer in layers]),
        Col("name", [escape(layer.name) for layer in layers], rank=3, wrap=True),
        Col("heads", [heads(layer) for layer in layers], rank=1),
        Col("κ(W_Q)", [num(layer.kappas.wq) for layer in layers]),
        Col("κ(W_K)", [num(layer.kappas.wk) for layer in layers]),
        Col("κ(W_V)", [num(layer.kappas.wv) for layer in layers]),
        Col("κ(W_O)", [num(layer.wo) for layer in layers], rank=2),
        Col(FACTOR, [num(layer.factor_max) for layer in layers]),
        Col("Q/K/V", [escape(layer.qkv_source) for layer in layers], rank=4, wrap=True),
    ]
    title = "weights per layer (whole projections; the factor is μ(LA)'s without κ(A_l)³)"
    return fitted(cols, width, title=escape(title), title_justify="left")


def head_table(layer: LayerWeights, width: int = 200) -> Table:
    """One row per head of ``layer``, fitted to ``width`` (folding its headers, never a number)."""
    k, wo, n = layer.kappas, layer.wo_heads, range(len(layer.factor_heads))
    cols = [
        Col("head", [str(h) for h in n]),
        Col("κ(W_Q^h)", [num(k.wq_heads[h]) for h in n]),
        Col("κ(W_K^h)", [num(k.wk_heads[h]) for h in n]),
        Col("κ(W_V^h)", [num(k.wv_heads[h]) for h in n]),
        Col("κ(W_O^h)", [num(None if wo is None else wo[h]) for h in n]),
        Col("κ(W_Q^h) κ(W_K^h) κ(W_V^h)", [num(f) for f in layer.factor_heads]),
    ]
    title = escape(f"layer {layer.index} ({layer.name}) per head")
    return fitted(cols, width, title=title, title_justify="left")[0]


def render(out: Console, report: WeightsReport, heads: bool = False) -> None:
    m = report.model
    if not quiet():
        say(
            out,
            f"[bold]{escape(m.spec)}[/] ({escape(m.model_from)}): {escape(m.family)}, {m.source}, "
            f"{m.weights} weights, {m.num_layers} layers — weights only, no inputs",
        )
    if report.embedding_table is not None:
        for line in table_lines(report.embedding_table):
            say(out, escape(line))
    if report.layers:
        table, dropped = layer_table(report.layers, out.width)
        out.print(table)
        dropped_line(out, dropped)
        if heads:
            for layer in report.layers:
                out.print(head_table(layer, out.width))
    notes(out, report.notes)
