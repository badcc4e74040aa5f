"""The tables ``condcli spectrum`` prints: X, the layers (plain and conditioned forward), the heads."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from condcli.cli.flags import as_flags
from condcli.cli.tables import header, median, notes, quiet, stat
from condcli.errors import UsageError
from condcli.numbers import APPROX, WARN, num, supported_digits
from condcli.reports.metrics import FORWARD, HEAD, MetricDef, column_notes, with_weights
from condcli.reports.spectrum import SINK_NOTE, LayerReport, SpectrumReport
from condcli.spectra import Aggregate


def _row(table: Table, name: str, a: Aggregate, note: str = "") -> None:
    table.add_row(name, stat(a, "median"), stat(a, "min"), stat(a, "max"), note)


def embedding_table(report: SpectrumReport) -> Table:
    e, s = report.embedding, report.settings
    n = report.inputs.count
    where = escape(f"X = {e.description} [{e.where}]") + (
        "" if e.after_position_encoding else ", no position encoding"
    )
    table = Table("quantity", "median", "min", "max", "note", title=where, title_justify="left")
    below, repeated = len(e.below_precision_samples), len(e.repeated_rows_samples)
    notes = []
    if repeated:
        notes.append(f"inf in {repeated}/{n} samples, exactly: {e.repeated_reason()}")
    if below:
        notes.append(
            f"{WARN} {below}/{n} samples below {e.resolution_dtype} resolution: "
            "κ is a floor, not a measurement"
        )
    _row(table, "κ(X)", e.kappa, "; ".join(notes))
    if _differs(e.kappa_distinct, e.kappa):
        _row(
            table, "κ_distinct(X)", e.kappa_distinct, "κ of the distinct rows: X without its repeated tokens"
        )
    own = (
        "the model's own shift: its blocks see this" if e.model_conditioning else "exact, not (σ_1+λ)/(σ_k+λ)"
    )
    _row(table, f"κ(X + {s.lam:g}·I_k)", e.kappa_conditioned, own)
    _row(table, "κ(X + C)", e.kappa_corrected, "Theorem 4.4 correction, ≤ 2")
    _row(table, "σ_max", e.sigma_max)
    sigma_min = e.sigma_min
    table.add_row(
        "σ_min", *(sigma_stat(sigma_min, q) for q in ("median", "min", "max")), e.sigma_min_reason() or ""
    )
    short = len({*e.below_precision_samples, *e.repeated_rows_samples})
    rank_note = (
        f"full (k = min(N, d)) in every sample, at {e.resolution_dtype} resolution"
        if not short
        else f"below k = min(N, d) in {short}/{n} samples, at {e.resolution_dtype} resolution"
    )
    _row(table, "numerical rank", e.numerical_rank, rank_note)
    bound = "(σ_1+λ)/(λ−σ_1); inf: none, λ ≤ σ_1" if e.weyl_bound.inf_count else "(σ_1+λ)/(λ−σ_1)"
    _row(table, f"Weyl bound on κ(X + {s.lam:g}·I_k)", e.weyl_bound, bound)
    return table


def sigma_stat(a: Aggregate, statistic: str) -> str:
    """A statistic of σ_min (docs/math.md#spectra-below-resolution): "0" where repeated rows force it to
    exactly 0, "< 5.3e-15" where it is below the capture's resolution (only a ceiling), else the value."""
    v = float(getattr(a, statistic))
    if a.is_ceiling(statistic):
        return f"< {num(v, 2)}"
    if v == 0 and a.zero_count:
        return "0"
    return stat(a, statistic)


def _differs(a: Aggregate | None, b: Aggregate | None) -> bool:
    """Whether a shadow metric (κ_distinct) says something its metric (κ) does not: a sample differs."""
    return a is not None and b is not None and a.per_sample != b.per_sample


def _shown(report: SpectrumReport, m: MetricDef) -> bool:
    """A shadow metric's column is shown only where some layer's values differ from its metric's."""
    if m.shadow_of is None:
        return True
    return any(_differs(layer.plain[m.key], layer.plain[m.shadow_of]) for layer in report.layers)


def _weight(layer: LayerReport, metric: MetricDef) -> str:
    return num(layer.weights.whole[metric.key])


@dataclass(frozen=True)
class Column:
    """One column of the per-layer table: a registry metric of the plain or the conditioned forward."""

    metric: MetricDef
    conditioned: bool

    @property
    def key(self) -> str:
        """How `columns` names it: the registry key, ``conditioned.KEY`` for the conditioned forward."""
        return ("conditioned." if self.conditioned else "") + self.metric.key

    @property
    def rank(self) -> int | None:
        return self.metric.compact_conditioned if self.conditioned else self.metric.compact

    def header(self, lam: str) -> str:
        text = self.metric.column or self.metric.label
        return f"{text} +{lam}I" if self.conditioned else text

    def cell(self, layer: LayerReport) -> str:
        if self.metric.scope == "weight":
            return _weight(layer, self.metric)
        f = layer.conditioned if self.conditioned else layer.plain
        return "—" if f is None else median(f[self.metric.key], f.below_of(self.metric))


# every column the per-layer table can have, as `columns` names them
COLUMN_KEYS: tuple[str, ...] = (
    *(m.key for m in with_weights(FORWARD)),
    *(Column(m, True).key for m in FORWARD),
)


def available_columns(report: SpectrumReport) -> list[Column]:
    """Every column this report can fill, in the table's order (plain with κ(W), then conditioned)."""
    plain = [m for m in with_weights(FORWARD) if m.column is not None and _shown(report, m)]
    if not any(layer.plain[m.key] is not None for layer in report.layers for m in FORWARD if m.needs_mixing):
        plain = [m for m in plain if not m.needs_mixing]  # every layer mixes with P itself
    cond = [m for m in FORWARD if m.conditioned_column and _shown(report, m)]
    cond = cond if report.conditioned_forward.applied else []
    return [Column(m, False) for m in plain] + [Column(m, True) for m in cond]


def chosen_columns(report: SpectrumReport, columns: Sequence[str] | None, wide: bool) -> list[Column]:
    """``columns`` (registry keys, ``conditioned.KEY``; checked, with a "did you mean"), every column
    (``wide``), or the registry's default set (``compact``)."""
    every = available_columns(report)
    if wide:
        return every
    if columns is None:
        return [c for c in every if c.rank is not None]
    check_column_keys(columns)
    known = {c.key: c for c in every}
    for key in columns:
        if key not in known:
            raise _refused(key, "is not a column of this report", list(known))
    return [known[key] for key in columns]


def parse_columns(text: str | None, wide: bool) -> list[str] | None:
    """`columns` as given ("kappa, mu_la,conditioned.mu_la"), each a registry key of the per-layer table
    (checked here, before any work, with a "did you mean"); None where not given."""
    if text is None:
        return None
    if wide:
        raise UsageError("`columns` and `wide` both choose the columns", "give one of them")
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise UsageError("`columns` is empty", "e.g. `columns=kappa,mu_la`")
    check_column_keys(keys)
    return keys


def check_column_keys(keys: Sequence[str]) -> None:
    """Each of ``keys`` a column the per-layer table can have (:data:`COLUMN_KEYS`)."""
    for key in keys:
        if key not in COLUMN_KEYS:
            raise _refused(key, "is not a metric key", COLUMN_KEYS)


def _refused(key: str, why: str, among: Sequence[str]) -> UsageError:
    close = difflib.get_close_matches(key, among, n=1)
    hint = f"did you mean `columns={close[0]}`?" if close else "pick from " + ", ".join(among)
    return UsageError(f"`columns`: {key!r} {why}", hint)


def _width(cells: Sequence[str]) -> int:
    """A column's width in the table: its widest cell, padding and a border."""
    return max(cell_len(c) for c in cells) + 3


def layer_table(
    report: SpectrumReport,
    columns: Sequence[str] | None = None,
    *,
    wide: bool = False,
    width: int | None = None,
) -> tuple[Table, list[Column]]:
    """One row per layer: the columns ``columns`` names, all (``wide``), or the registry's default set
    dropped from its least important where it would not fit ``width`` terminal columns (never a number
    cut short); and the columns shown."""
    lam = f"{report.settings.lam:g}"
    cols = chosen_columns(report, columns, wide)
    names = [
        escape(f"{layer.index} {layer.name}") + (UNVERIFIED if _unverified(layer) else "")
        for layer in report.layers
    ]
    cells = {c.key: [c.cell(layer) for layer in report.layers] for c in cols}
    if width is not None and columns is None and not wide:
        total = _width(["layer", *names]) + 1 + sum(_width([c.header(lam), *cells[c.key]]) for c in cols)
        for c in sorted(cols, key=lambda c: -(c.rank or 0)):
            if total <= width or len(cols) == 1:
                break
            cols.remove(c)
            total -= _width([c.header(lam), *cells[c.key]])
    table = Table(
        "layer",
        *(c.header(lam) for c in cols),
        title="layers (medians over samples; μ: max over heads)",
        title_justify="left",
    )
    for column in table.columns:
        column.no_wrap = True
    for i, name in enumerate(names):
        table.add_row(name, *(cells[c.key][i] for c in cols))
    return table, cols


def heads_table(layer: LayerReport) -> Table:
    """Per head: the weight κ of its slices, then every per-head metric of the registry (:data:`HEAD`) that
    has a column and that some head of this layer has (κ(M) only where the layer mixes with M ≠ P)."""
    heads = layer.heads_detail or ()
    cols = [m for m in HEAD if m.column is not None and (not m.needs_mixing or any(h[m.key] for h in heads))]
    table = Table(
        "head",
        "κ(W_Q^h)",
        "κ(W_K^h)",
        "κ(W_V^h)",
        *(m.column or m.label for m in cols),
        title=escape(f"layer {layer.index} {layer.name}: per head (medians over samples)"),
        title_justify="left",
    )
    w = layer.weights
    for h in heads:
        weights = (num(w.wq_heads[h.head]), num(w.wk_heads[h.head]), num(w.wv_heads[h.head]))
        table.add_row(str(h.head), *weights, *(median(h[m.key]) for m in cols))
    return table


UNVERIFIED = " ?"  # the generic reading of this layer's Q/K/V was not proven on the model


def _unverified(layer: LayerReport) -> bool:
    return layer.qkv_source == "generic (unverified)"


def mu_note(shown: Sequence[Column]) -> str:
    """How μ is formed from what the table prints (and where the rest is)."""
    keys = {c.key for c in shown}
    weights = {"kappa_wq", "kappa_wk", "kappa_wv"} <= keys
    parts = [
        "μ(LA) = κ(W_Q^h)κ(W_K^h)κ(W_V^h)κ(A_l)³ and μ(A) = κ(P)κ(A_l)κ(W_V^h), the worst head: κ(W^h) are "
        "each head's d×d_h slices (`heads` lists them per head)"
        + (", not the whole-projection κ(W) columns (d × H·d_h)" if weights else "")
    ]
    if "kappa_attn_input" not in keys or not weights:
        parts.append("κ(A_l) and the whole-projection κ(W): `wide`")
    return "; ".join(parts) + "."


def _gqa(report: SpectrumReport) -> bool:
    """Whether some layer has fewer key/value heads than query heads."""
    return any(
        layer.weights.kv_heads is not None and layer.weights.kv_heads < layer.heads for layer in report.layers
    )


def _footnotes(out: Console, report: SpectrumReport, shown: Sequence[Column]) -> None:
    if quiet():
        return
    for index, name, why in report.refused:
        out.print(
            escape(f"— layer {index} {name}: no numbers, its Q/K/V reading could not be proven ({why}); ")
            + "declare it with `--adapter` (a TOML file)."
        )
    if any(_unverified(layer) for layer in report.layers):
        out.print(
            f"{UNVERIFIED.strip()} after a layer: its Q/K/V were inferred by the generic path and could not"
            " be proven on the model's first batch (see the notes); declare them with `--adapter` (TOML)."
        )
    out.print(escape(as_flags(mu_note(shown))))
    keys = {c.key for c in shown}
    causal = any(layer.causal or "causal" in layer.attention for layer in report.layers)
    for line in column_notes(keys):
        if line.startswith("sink:") and causal:
            line = SINK_NOTE  # the same, with the queries a causal sink score skips
        out.print(escape(line))
    if _gqa(report) and keys & {"kappa_wk", "kappa_wv", "mu_la", "mu_a"}:
        out.print("under GQA κ(W_K), κ(W_V) are d × H_kv·d_h.")
    if any(layer.plain["kappa_mixing"] is not None for layer in report.layers):
        out.print(
            "κ(M): the matrix that really mixes the tokens (shaped attention αI + βP, from the attention's "
            "mixing_matrix(P)); where a layer has one, μ(A) = κ(M)κ(A_l)κ(W_V) uses it in place of κ(P)."
        )
    if any(layer.plain.below.get("probs") for layer in report.layers):
        out.print(
            f"{WARN} on κ(P)/μ(A): P is numerically singular below float resolution in some samples "
            "(attention is low rank, as Linformer observed): such a κ is only the floor σ_1/tol, and a "
            'statistic it can move reads "≥ value ⚠".'
        )
    repeats = [layer for layer in report.layers if any((layer.plain.repeated or {}).values())]
    if repeats:
        where = ", ".join(str(layer.index) for layer in repeats)
        out.print(
            f"inf in layer(s) {where}: X_l or A_l repeats rows exactly (repeated tokens; X carries no "
            "positions), so κ and μ are ∞ exactly, not a floor; κ_distinct(X_l) is κ over the distinct rows."
        )
    if any(layer.plain.below.get("x") or layer.plain.below.get("attn_input") for layer in report.layers):
        out.print(f"{WARN} on κ(X_l)/κ(A_l): some samples below the capture dtype's resolution.")
    heads_lines = [layer.heads_line() for layer in report.layers]
    for heads in heads_lines:
        if heads is not None:
            out.print(escape(heads))
    if "sink" not in keys and any(line and "attention sinks" in line for line in heads_lines):
        out.print(escape(SINK_NOTE))  # a heads line names sinks, but no column explains the score
    missing = [layer for layer in report.layers if layer.probs_note is not None]
    if missing:
        where = ", ".join(str(layer.index) for layer in missing)
        out.print(escape(f"— in layer(s) {where}: {missing[0].probs_note}"))


def _aggregates(report: SpectrumReport) -> Iterator[Aggregate]:
    """Every aggregate the tables print (embedding, each layer's forwards, each head's)."""
    e = report.embedding
    yield from (e.kappa, e.kappa_distinct, e.kappa_conditioned, e.kappa_corrected)
    for layer in report.layers:
        forwards = (layer.plain, layer.conditioned) if layer.conditioned is not None else (layer.plain,)
        for f in forwards:
            yield from (f[m.key] for m in FORWARD if f[m.key] is not None)  # type: ignore[misc]
        for h in layer.heads_detail or ():
            yield from (a for a in (h[m.key] for m in HEAD if m.flag is not None) if a is not None)


def approximate(aggregates: Iterable[Aggregate]) -> bool:
    """Whether a table shows some statistic with fewer digits than usual (its uncertainty supports fewer)."""
    return any(
        not a.is_floor(s) and supported_digits(float(getattr(a, s)), a.uncertainty(s)) < 3
        for a in aggregates
        for s in ("median", "min", "max")
    )


APPROX_NOTE = (
    f"{APPROX}: only the digits the capture supports; the capture's own rounding moves σ_k by up to "
    "tol = u·‖X‖_F (Weyl), so κ is uncertain by tol/σ_k, large near the floor (JSON: rel_uncertainty)."
)


def render(
    out: Console, report: SpectrumReport, columns: Sequence[str] | None = None, *, wide: bool = False
) -> None:
    """The tables: X, the layers (``columns``, all with ``wide``, else the default set that fits the
    console), the heads where asked for, and the footnotes."""
    header(out, report.model, report.inputs)
    out.print(embedding_table(report))
    if report.embedding_table is not None:
        from condcli.cli.weights_table import table_lines

        for line in table_lines(report.embedding_table):
            out.print(escape(line))
    if report.layers:
        table, shown = layer_table(report, columns, wide=wide, width=out.width)
        out.print(table)
        for layer in report.layers:
            if layer.heads_detail is not None:
                out.print(heads_table(layer))
        _footnotes(out, report, shown)
    if approximate(_aggregates(report)) and not quiet():
        out.print(APPROX_NOTE)
    cf = report.conditioned_forward
    if not cf.applied and cf.reason:
        out.print(escape(f"conditioned forward ({cf.conditioning}): not run — {as_flags(cf.reason)}"))
    notes(out, report.notes)
