"""The sections of a ``spectrum`` report (also the analysis part of a ``check`` report): X and its Figure-1
spectrum, the per-layer κ and μ curves (plain against conditioned), the per-layer table and the per-head
tables. The figures are described in :mod:`condcli.figures.spectrum` (the PNGs draw the same descriptions);
labels come from the metric registry."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.figures import spectrum as described_spectrum
from condcli.figures.labels import html_text
from condcli.html.controls import picker, toggles
from condcli.html.described import chart, heat
from condcli.html.numbers import floats, num, to_float
from condcli.html.section import (
    Report,
    Section,
    as_map,
    as_maps,
    conditioned_note,
    guarded,
    lam_text,
    missing,
    notes_section,
)
from condcli.html.tables import Cell, agg_cell, footnotes_html, marks, number, table
from condcli.reports.metrics import EMBEDDING, FORWARD, HEAD, MetricDef, flag_of, with_weights
from condcli.reports.spectrum import SINK_NOTE, heads_line

EMB = {m.key: m for m in EMBEDDING}


def embedding_table(report: Report) -> str:
    """quantity × (median, min, max, note), as the CLI's first table."""
    emb = as_map(report.get("embedding"))
    lam = lam_text(report)
    count = as_map(report.get("inputs")).get("count")
    res = emb.get("resolution_dtype") or emb.get("capture_dtype") or "the capture dtype"
    below = len(emb.get("below_precision_samples") or []) or int(to_float(emb.get("below_precision")) or 0)
    rows: list[list[Cell | str]] = []
    notes = []
    repeated = int(to_float(emb.get("repeated_rows")) or 0)
    if repeated:
        notes.append(f"inf in {repeated}/{count} samples, exactly: {emb.get('repeated_rows_reason')}")
    if below:
        notes.append(f"⚠ {below}/{count} samples below {res} resolution: κ is a floor, not a measurement")
    distinct = (
        (
            (
                "kappa_distinct",
                EMB["kappa_distinct"].label,
                "κ of the distinct rows: X without its repeated tokens",
            ),
        )
        if differs(emb.get("kappa_distinct"), emb.get("kappa"))
        else ()
    )
    spec = (
        ("kappa", EMB["kappa"].label, "; ".join(notes)),
        *distinct,
        ("kappa_conditioned", f"κ(X + {lam}·I_k)", "exact, not (σ_1+λ)/(σ_k+λ)"),
        ("kappa_corrected", EMB["kappa_corrected"].label, "Theorem 4.4 correction, ≤ 2"),
        ("sigma_max", "σ_max", ""),
        ("sigma_min", "σ_min", ""),
        ("numerical_rank", "numerical rank", f"at {res} resolution"),
        ("weyl_bound", f"Weyl bound on κ(X + {lam}·I_k)", "(σ_1+λ)/(λ−σ_1); inf: none, λ ≤ σ_1"),
    )
    for key, label, note in spec:
        agg = emb.get(key)
        if not isinstance(agg, Mapping):
            continue
        if key == "sigma_min":
            reason = agg.get("reason")
            rows.append([label, *(sigma_cell(agg, s) for s in ("median", "min", "max")), str(reason or "")])
            continue
        rows.append([label, *(agg_cell(agg, s) for s in ("median", "min", "max")), note])
    if not rows:
        return missing("the statistics of X")
    where = emb.get("description") or emb.get("where") or ""
    return table(["quantity", "median", "min", "max", "note"], rows, f"X = {where}", "table-embedding")


def sigma_cell(agg: Mapping[str, Any], statistic: str) -> Cell:
    """A statistic of σ_min as the CLI prints it (docs/math.md#spectra-below-resolution): "0" where repeated
    rows force it, "< 5.3e-15" where it is only a ceiling (below the capture's resolution)."""
    v = to_float(agg.get(statistic))
    marks = agg.get("ceiling")
    if v is not None and isinstance(marks, Mapping) and marks.get(statistic) is True:
        return Cell(f"< {num(v, 2)}", v, title="below the capture's resolution: σ_min < tol = u·‖X‖_F")
    if v == 0 and (to_float(agg.get("zero_count")) or 0) > 0:
        return Cell("0", v)
    return agg_cell(agg, statistic)


def spectrum_chart(report: Report) -> str:
    """Figure 1: σ_i of X (red) and of X + λ·I_k (green) by index, log y, p10–p90 bands."""
    panel = described_spectrum.spectrum(report).panel(0)
    if not panel.drawn():
        return missing(panel.missing)
    lam = lam_text(report)
    groups = [("plain", "X"), ("conditioned", f"X + {lam}·I_k")]
    return toggles("fig-spectrum", groups) + f'<div id="fig-spectrum">{chart(panel, "chart-spectrum")}</div>'


def layer_charts(report: Report) -> str:
    """Per-layer median κ(X_l), κ(A_l) (left) and μ(LA) (right), plain red and conditioned green."""
    figure = described_spectrum.layers(report)
    if figure is None:
        return missing("per-layer results")
    left, right = figure.panel(0), figure.panel(1)
    has_cond = any(s.group == "conditioned" for s in left.series)
    lam = lam_text(report)
    controls = toggles(
        "fig-layers", [("plain", "plain forward"), ("conditioned", f"conditioned (X + {lam}·I_k)")]
    )
    return (controls if has_cond else "") + (
        f'<div id="fig-layers" class="pair">{chart(left, "chart-layers-kappa")}'
        f"{chart(right, 'chart-layers-mu')}</div>"
    )


def differs(a: object, b: object) -> bool:
    """Whether a shadow metric's aggregate (κ_distinct) says something its metric's (κ) does not."""
    return isinstance(a, Mapping) and isinstance(b, Mapping) and a.get("per_sample") != b.get("per_sample")


def _shown(layers: list[Mapping[str, Any]], m: MetricDef) -> bool:
    """A shadow metric's column is shown only where some layer's values differ from its metric's."""
    return m.shadow_of is None or any(differs(layer.get(m.key), layer.get(m.shadow_of)) for layer in layers)


def _columns(layers: list[Mapping[str, Any]]) -> list[MetricDef]:
    cols = [m for m in with_weights(FORWARD) if m.column is not None and _shown(layers, m)]
    if not any(layer.get(m.key) is not None for layer in layers for m in FORWARD if m.needs_mixing):
        cols = [m for m in cols if not m.needs_mixing]
    return cols


def _below(src: Mapping[str, Any], metric: MetricDef, mixing: bool) -> int | None:
    flag = flag_of(metric, mixing)
    if flag is None:
        return None
    v = to_float(as_map(src.get("below_precision")).get(flag))
    return None if v is None else int(v)


def _forward_cell(src: Mapping[str, Any], metric: MetricDef, mixing: bool) -> Cell:
    return agg_cell(src.get(metric.key), "median", _below(src, metric, mixing))


def layer_table(report: Report) -> str:
    """One row per layer: the registry's columns, plain then conditioned (medians over samples)."""
    layers = as_maps(report.get("layers"))
    cols = _columns(layers)
    cond_cols = [m for m in FORWARD if m.conditioned_column and _shown(layers, m)]
    has_cond = any(isinstance(layer.get("conditioned"), Mapping) for layer in layers)
    lam = lam_text(report)
    header = ["layer", "name", *(m.column or m.label for m in cols)]
    if has_cond:
        header += [f"{m.column} +{lam}I" for m in cond_cols]
    rows: list[list[Cell | str]] = []
    for layer in layers:
        mixing = layer.get("kappa_mixing") is not None
        row: list[Cell | str] = [number(to_float(layer.get("index")), 6), str(layer.get("name", ""))]
        for m in cols:
            row.append(
                number(to_float(layer.get(m.key))) if m.scope == "weight" else _forward_cell(layer, m, mixing)
            )
        if has_cond:
            c = as_map(layer.get("conditioned"))
            cmix = c.get("kappa_mixing") is not None
            row += [_forward_cell(c, m, cmix) if c else Cell("—") for m in cond_cols]
        rows.append(row)
    return table(header, rows, "medians over samples; μ: max over heads", "table-layers")


HEAD_COLS: tuple[tuple[str, str], ...] = tuple((m.key, m.column) for m in HEAD if m.column is not None)


def heads_block(layer: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The per-head table of one layer (medians over samples), and the footnote marks its cells carry."""
    heads = as_maps(layer.get("heads_detail"))
    cols = [(k, label) for k, label in HEAD_COLS if any(h.get(k) is not None for h in heads)]
    weights = [(f"kappa_w{w}_heads", f"κ(W_{w.upper()}^h)") for w in ("q", "k", "v")]
    rows: list[list[Cell | str]] = []
    for h in heads:
        head = to_float(h.get("head"))
        i = int(head) if head is not None else -1
        row: list[Cell | str] = [number(head, 6)]
        for w, _ in weights:
            ws = floats(layer.get(w))
            row.append(number(ws[i]) if 0 <= i < len(ws) else Cell("—"))
        row += [agg_cell(h.get(k)) for k, _ in cols]
        rows.append(row)
    header = ["head", *(label for _, label in weights), *(label for _, label in cols)]
    return table(
        header, rows, "medians over samples", f"table-heads-{layer.get('index')}", notes=False
    ), marks(rows)


def heads_heatmap(report: Report, key: str) -> str:
    """layers × heads of a per-head median (log colour scale), "" where no head has it."""
    described = described_spectrum.heads_heatmap(report, key)
    return "" if described is None else heat(described, f"heat-{key}")


def heads_section(report: Report) -> str:
    layers = [layer for layer in as_maps(report.get("layers")) if as_maps(layer.get("heads_detail"))]
    maps = '<div class="pair">' + heads_heatmap(report, "mu_la") + heads_heatmap(report, "mu_a") + "</div>"
    blocks, used = [], []
    for layer in layers:
        label = f"layer {layer.get('index')} {layer.get('name', '')}"
        body, found = heads_block(layer)
        used += found
        blocks.append(
            f'<details open data-pick="{escape(str(layer.get("index")))}"><summary>{escape(label)}</summary>'
            f"{body}</details>"
        )
    options = [
        (str(layer.get("index")), f"layer {layer.get('index')} {layer.get('name', '')}") for layer in layers
    ]
    return (
        maps
        + picker("heads-panels", "layer", options, "all layers")
        + f'<div id="heads-panels">{"".join(blocks)}</div>'
        + footnotes_html(used)
    )


def _footnotes(report: Report) -> str:
    layers = as_maps(report.get("layers"))
    out = [
        "κ(W): the whole projection (d × H·d_h; d × H_kv·d_h for W_K, W_V under GQA); μ(LA) and μ(A) use "
        "each head's d×d_h slices and the worst head; H(P): the lowest head; srank: stable rank Σσ²/σ_1²."
    ]
    for layer in layers:
        sinks, entropies = floats(layer.get("sink_heads")), floats(layer.get("attention_entropy_heads"))
        line = heads_line(
            int(to_float(layer.get("index")) or 0), str(layer.get("name", "")), sinks, entropies
        )
        if line is not None:
            out.append(line)
    if any(layer.get("sink_heads") for layer in layers):
        out.append(SINK_NOTE)
    missing_p = [layer for layer in layers if isinstance(layer.get("probs_note"), str)]
    if missing_p:
        where = ", ".join(str(layer.get("index")) for layer in missing_p)
        out.append(f"— in layer(s) {where}: {missing_p[0]['probs_note']}")
    for refused in as_maps(report.get("layers_refused")):  # no numbers, with the refusal's code (issue 42)
        reason = refused.get("reason")
        code, text = (reason.get("code"), reason.get("text")) if isinstance(reason, Mapping) else (None, None)
        said = f"[{code}] {text}" if code else str(refused.get("refused", ""))
        out.append(f"— layer {refused.get('index')} {refused.get('name', '')}: no numbers, refused: {said}")
    return "".join(f'<p class="footnote">{html_text(t)}</p>' for t in out)


def sections(report: Report) -> list[Section]:
    """X (table, Figure 1; its headline is in the page header), the layers (curves and table), the heads,
    the notes."""
    out = [
        guarded("embedding", "Embedded tokens X", lambda: embedding_table(report)),
        guarded("spectrum", "Spectrum of X (Figure 1)", lambda: spectrum_chart(report)),
    ]
    if isinstance(report.get("embedding_table"), Mapping):
        from condcli.html.sections_weights import embedding_table_html

        table = "Embedding table E (input-free)"
        out.append(guarded("embedding-table", table, lambda: embedding_table_html(report)))
    if as_maps(report.get("layers")):
        out.append(guarded("layer-curves", "Per-layer κ and μ", lambda: layer_charts(report)))
        out.append(
            guarded(
                "layers",
                "Per-layer table",
                lambda: layer_table(report) + _footnotes(report) + conditioned_note(report),
            )
        )
    else:
        out.append(
            Section("layers", "Per-layer table", missing("per-layer results") + conditioned_note(report))
        )
    if any(as_maps(layer.get("heads_detail")) for layer in as_maps(report.get("layers"))):
        out.append(guarded("heads", "Per-head tables", lambda: heads_section(report)))
    out += notes_section(report)
    return out
