"""Sections of a ``weights`` report's page: the embedding table (its spectrum and κ, the output head) and
the per-layer weight condition numbers, with each layer's heads. Also the embedding-table section a
``spectrum`` report's page can show (:func:`embedding_table_html`)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.figures.embedding_table import embedding_table
from condcli.html.described import chart
from condcli.html.section import Report, Section, as_map, as_maps, guarded, missing, notes_section
from condcli.html.tables import Cell, key_values, number, table
from condcli.numbers import num


def _f(value: object) -> float | None:
    from condcli.html.numbers import to_float

    return to_float(value)


def _matrix_pairs(label: str, part: Mapping[str, Any]) -> list[tuple[str, Any]]:
    shape = part.get("shape")
    return [
        (f"{label}: shape", " × ".join(str(v) for v in shape) if isinstance(shape, list) else None),
        (f"κ({label})", num(_f(part.get("kappa")))),
        ("σ_1", num(_f(part.get("sigma_max")))),
        ("σ_k", ("< " if part.get("sigma_min_ceiling") is True else "") + num(_f(part.get("sigma_min")))),
    ]


def embedding_table_html(report: Report) -> str:
    """The table's κ, σ_1, σ_k and shape, the output head (tied, untied with its own numbers, or none) and
    the chart of E's spectrum."""
    table_part = report.get("embedding_table")
    if not isinstance(table_part, Mapping):
        return missing("an embedding table (the model has no token-embedding matrix)")
    pairs = _matrix_pairs("E", table_part)
    tied = table_part.get("tied")
    head = table_part.get("lm_head")
    if tied is True:
        pairs.append(("output head", "tied to E (the same weights)"))
    elif isinstance(head, Mapping):
        pairs += [("output head", "untied"), *_matrix_pairs("lm_head", head)]
    elif tied is False:
        pairs.append(("output head", "untied, its weights not loaded"))
    else:
        pairs.append(("output head", "none in this model"))
    figure = embedding_table(report)
    drawn = "" if figure is None else chart(figure.panel(0), "embedding-table-spectrum")
    return key_values(pairs) + drawn


def _cells(values: object) -> list[Cell]:
    return [number(_f(v)) for v in values] if isinstance(values, list) else []


def _layers_html(report: Report) -> str:
    layers = as_maps(report.get("layers"))
    if not layers:
        return missing("layers (none were chosen)")
    cols = ["layer", "name", "heads", "κ(W_Q)", "κ(W_K)", "κ(W_V)", "κ(W_O)", "max_h factor", "Q/K/V"]
    rows: list[list[Cell | str]] = []
    for layer in layers:
        heads = f"{layer.get('heads')}" + (
            f" / {layer.get('kv_heads')} KV"
            if layer.get("kv_heads") not in (None, layer.get("heads"))
            else ""
        )
        rows.append(
            [
                Cell(str(layer.get("index")), _f(layer.get("index"))),
                str(layer.get("name", "")),
                heads,
                *(number(_f(layer.get(k))) for k in ("kappa_wq", "kappa_wk", "kappa_wv", "kappa_wo")),
                number(_f(layer.get("weight_factor"))),
                str(layer.get("qkv_source", "")),
            ]
        )
    caption = "one row per layer; the factor is κ(W_Q^h)κ(W_K^h)κ(W_V^h), μ(LA) without κ(A_l)³"
    out = table(cols, rows, caption, "weights-layers")
    for layer in layers:
        per = [
            _cells(layer.get(k))
            for k in (
                "kappa_wq_heads",
                "kappa_wk_heads",
                "kappa_wv_heads",
                "kappa_wo_heads",
                "weight_factor_heads",
            )
        ]
        count = max((len(p) for p in per), default=0)
        head_rows: list[list[Cell | str]] = [
            [Cell(str(h), float(h)), *(p[h] if h < len(p) else Cell("—") for p in per)] for h in range(count)
        ]
        head_cols = ["head", "κ(W_Q^h)", "κ(W_K^h)", "κ(W_V^h)", "κ(W_O^h)", "factor"]
        index = layer.get("index")
        body = table(head_cols, head_rows, f"layer {index} per head", f"weights-heads-{index}")
        out += f"<details><summary>layer {escape(str(index))}: per head</summary>{body}</details>"
    return out


def sections(report: Report) -> list[Section]:
    """The page of a ``weights`` report: the embedding table, the layers and the notes."""
    out = [
        guarded("embedding-table", "Embedding table E", lambda: embedding_table_html(report)),
        guarded("weights-layers", "Weights per layer", lambda: _layers_html(report)),
    ]
    out += notes_section(report)
    return out


def weights_page(report: Report) -> str:
    """The whole self-contained page of a ``weights`` report (the page shell of every command)."""
    from condcli.html.page import page

    return page(report, sections(as_map(report)))
