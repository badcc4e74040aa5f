"""The metric registry: every number condcli reports and gates on, declared once (docs/math.md#spectra to
#ranks).

A :class:`MetricDef` says what a metric is called in the JSON report (``key`` within its ``scope``), how it is
shown (``label``, ``column``), which way is worse, whether a below-precision count qualifies it (``flag``),
and how ``check`` gates it (``gate``: the rule name, whose option is derived from it). The report's JSON,
the tables, the gate rules and their config keys, baselines, ``compare`` and the plots all read these
declarations; the numbers themselves are computed in :mod:`condcli.analysis`.

Adding a metric: one declaration here, and its per-sample value in the analysis accumulator that owns its
inputs (:class:`condcli.analysis.layers.ForwardAccumulator` for per-layer metrics).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

Scope = Literal["embedding", "forward", "weight", "head", "table"]
MIXING_FLAG = "mixing"  # the below-precision flag of the mixing matrix M
Worse = Literal["higher", "lower"]


@dataclass(frozen=True)
class MetricDef:
    """One metric, as every consumer sees it."""

    key: str  # the JSON key within its scope: embedding.<key>, layers[i].<key>, layers[i].conditioned.<key>
    label: str  # how tables and messages name it, e.g. "μ(LA)"
    scope: Scope  # embedding: X; forward: per layer, plain and conditioned forward; weight: model constant
    worse: Worse  # which way is worse: "higher" (a condition number) or "lower" (an entropy, a rank)
    formula: str  # the definition, for help texts and the glossary
    flag: str | None = None  # forward: key in below_precision; embedding: the samples' below_precision
    gate: str | None = None  # rule name (also the config key), e.g. "max_mu_la"; None: not gateable
    gate_help: str = ""  # what the rule fails on
    limit_range: tuple[float, float] = (1.0, math.inf)  # the limits that can make sense
    column: str | None = None  # header of its column in the per-layer table; None: no column
    conditioned_column: bool = False  # also a column for the conditioned forward
    needs_probs: bool = False  # computed from P: absent where the family's P cannot be observed
    needs_mixing: bool = False  # computed from the mixing matrix M: absent where a layer mixes with P itself
    flag_mixing: bool = False  # where a layer mixes with M ≠ P, qualified by M's flag, not P's (μ(A))
    headline: bool = False  # one of the few per-layer numbers shown where space is short (track, monitor)
    needs_rotation: bool = (
        False  # only where the model rotates q and k (RoPE): absent from the JSON elsewhere
    )
    log_scale: bool = True  # plotted on a log axis (condition numbers); False: linear (an entropy in [0, 1])
    shadow_of: str | None = None  # a table shows it only where it differs from this metric (κ_distinct: κ)
    # the matrix whose exactly repeated rows make it inf (ROW_FLAGS: "x" X_l, "attn_input" A_l), if any
    rows_of: str | None = None
    distinct: str | None = None  # the metric over the distinct rows to gate instead where rows repeat
    # the per-layer table's default columns (it fits 100 terminal columns): their rank, 1 most important,
    # dropped from the last where the terminal is narrower; None: only with `columns` or `wide`
    compact: int | None = None
    compact_conditioned: int | None = None  # likewise its conditioned-forward column
    note: str = ""  # the footnote under a table that shows its column ("" none): only where it is shown

    @property
    def option(self) -> str | None:
        """The ``check`` option of its gate rule, e.g. ``--max-mu-la``."""
        return None if self.gate is None else "--" + self.gate.replace("_", "-")

    @property
    def bound(self) -> Literal["max", "min"]:
        """A gate limit is a maximum for higher-is-worse metrics and a minimum for lower-is-worse ones."""
        return "max" if self.worse == "higher" else "min"

    def beyond(self, value: float, limit: float) -> bool:
        """Whether ``value`` is on the wrong side of ``limit`` (a value exactly at its limit passes)."""
        return value > limit if self.worse == "higher" else value < limit

    def worst(self, values: list[float]) -> float:
        return max(values) if self.worse == "higher" else min(values)

    def regressed(self, old: float, new: float, tolerance: float) -> bool:
        """Worse than ``old`` by more than the relative ``tolerance`` (inf now and finite before counts)."""
        if self.worse == "higher":
            return new > old * (1 + tolerance)
        return new < old * (1 - tolerance)

    def improved(self, old: float, new: float, tolerance: float) -> bool:
        """Better than ``old`` by more than the relative ``tolerance``."""
        if self.worse == "higher":
            return new * (1 + tolerance) < old
        return new * (1 - tolerance) > old


def _gate_help(what: str) -> str:
    return f"Fail when {what} of any analysed layer"


EMBEDDING: tuple[MetricDef, ...] = (
    MetricDef(
        "kappa",
        "κ(X)",
        "embedding",
        "higher",
        "σ_1/σ_k of the embedded tokens X (N × d, after position encoding), k = min(N, d)",
        flag="below_precision",
        rows_of="x",
        distinct="kappa_distinct",
        gate="max_kappa",
        gate_help="Fail when κ of the embedded tokens the blocks see (κ(X); κ(X + λ·I_k) for a model that "
        "adds its own shift) is above this, or when X is singular or below the capture dtype's resolution.",
    ),
    MetricDef(
        "kappa_distinct",
        "κ_distinct(X)",
        "embedding",
        "higher",
        "σ_1/σ_min(r, d) of X's r distinct rows (first occurrences, in order): X without its repeated "
        "tokens; = κ(X) where no row repeats",
        flag="distinct_below_precision",
        gate="max_kappa_distinct",
        gate_help="Fail when κ over X's distinct rows (repeated tokens removed: the κ that means something "
        "for a decoder LLM, whose X carries no positions) is above this, or below the capture's resolution.",
        shadow_of="kappa",
    ),
    MetricDef(
        "kappa_conditioned",
        "κ(X + λ·I_k)",
        "embedding",
        "higher",
        "exact κ of X + λ·I_k, I_k the N × d identity (not (σ_1+λ)/(σ_k+λ))",
    ),
    MetricDef(
        "kappa_corrected",
        "κ(X + C)",
        "embedding",
        "higher",
        "κ of X + C, C = σ_1·U_k V_kᵀ (Theorem 4.4): 2σ_1/(σ_1 + σ_k) ≤ 2",
    ),
)

WEIGHTS: tuple[MetricDef, ...] = tuple(
    MetricDef(
        f"kappa_w{w}",
        f"κ(W_{w.upper()})",
        "weight",
        "higher",
        f"σ_1/σ_k of the full d × (H·d_h) {name} projection",
        column=f"κ(W_{w.upper()})",
    )
    for w, name in (("q", "query"), ("k", "key"), ("v", "value"))
)

# the token-embedding table E itself (embedding_table.<key>): input-free, a model constant
TABLE: tuple[MetricDef, ...] = (
    MetricDef(
        "kappa",
        "κ(E)",
        "table",
        "higher",
        "σ_1/σ_min(V, d) of the token-embedding table E (V × d), float64; inf below float64 resolution",
        gate="max_kappa_table",
        gate_help="Fail when κ of the token-embedding table E (vocab × d; input-free) is above this, or E is "
        "singular at float64 resolution.",
    ),
)

FORWARD: tuple[MetricDef, ...] = (
    MetricDef(
        "kappa",
        "κ(X_l)",
        "forward",
        "higher",
        "σ_1/σ_k of the residual stream X_l entering block l",
        flag="x",
        rows_of="x",
        distinct="kappa_distinct",
        gate="max_kappa_layer",
        gate_help=_gate_help("κ(X_l)") + " is above this.",
        column="κ(X_l)",
        conditioned_column=True,
        headline=True,
        compact=1,
    ),
    MetricDef(
        "kappa_distinct",
        "κ_distinct(X_l)",
        "forward",
        "higher",
        "σ_1/σ_min(r, d) of the r distinct rows of X_l (first occurrences): = κ(X_l) where no row repeats",
        flag="x_distinct",
        gate="max_kappa_distinct_layer",
        gate_help=_gate_help("κ over the distinct rows of X_l") + " is above this.",
        column="κ_distinct(X_l)",
        shadow_of="kappa",
        compact=2,
    ),
    MetricDef(
        "kappa_attn_input",
        "κ(A_l)",
        "forward",
        "higher",
        "σ_1/σ_k of the attention input A_l (after the pre-norm); the worst attention group (window)",
        flag="attn_input",
        rows_of="attn_input",
        column="κ(A_l)",
        conditioned_column=True,
    ),
    MetricDef(
        "mu_la",
        "μ(LA)",
        "forward",
        "higher",
        "κ(W_Q^h)κ(W_K^h)κ(W_V^h)κ(A_l)³ (Proposition 4.2), the worst head",
        flag="attn_input",
        rows_of="attn_input",
        gate="max_mu_la",
        gate_help=_gate_help("μ(LA) (max over heads)") + " is above this.",
        column="μ(LA)",
        conditioned_column=True,
        headline=True,
        compact=3,
        compact_conditioned=7,
    ),
    MetricDef(
        "mu_a",
        "μ(A)",
        "forward",
        "higher",
        "κ(P)κ(A_l)κ(W_V^h), P the attention probabilities (κ(M) in place of κ(P) where the attention mixes "
        "the tokens with M ≠ P, e.g. shaped attention αI + βP), the worst head and group",
        flag="probs",
        rows_of="attn_input",
        column="μ(A)",
        conditioned_column=True,
        needs_probs=True,
        flag_mixing=True,
        compact=5,
    ),
    MetricDef(
        "kappa_probs",
        "κ(P)",
        "forward",
        "higher",
        "σ_1/σ_min(q,k) of the attention probabilities P, the worst head and group",
        flag="probs",
        column="κ(P)",
        needs_probs=True,
        compact=6,
    ),
    MetricDef(
        "kappa_mixing",
        "κ(M)",
        "forward",
        "higher",
        "σ_1/σ_min(q,k) of the matrix M that mixes the tokens where it is not P (shaped attention αI + βP: "
        "the attention's mixing_matrix(P)), the worst head and group; null where M = P",
        flag=MIXING_FLAG,
        column="κ(M)",
        needs_probs=True,
        needs_mixing=True,
        compact=6,  # where a layer mixes with M ≠ P: μ(A) uses κ(M) in place of κ(P)
    ),
    MetricDef(
        "attention_entropy",
        "H(P)",
        "forward",
        "lower",
        "mean over queries of −Σ_j p_j log p_j / log(keys the query attends to), the lowest head "
        "(entropy collapse, Zhai et al. 2023: 1 = uniform, 0 = one key)",
        gate="min_attention_entropy",
        gate_help=_gate_help("the normalised attention entropy (lowest head)")
        + " is below this (entropy collapse); between 0 and 1.",
        limit_range=(0.0, 1.0),
        column="H(P)",
        needs_probs=True,
        headline=True,
        log_scale=False,
        compact=4,
        note="H(P): normalised attention entropy (1 uniform, 0 collapsed), the lowest head.",
    ),
    MetricDef(
        "sink",
        "sink",
        "forward",
        "higher",
        "mean over queries of P[i, 0], the attention mass on the first key (attention sink, Xiao et al. "
        "2023); causal attention: queries 4… only, since the first see at most 4 keys; the highest head",
        gate="max_sink",
        gate_help=_gate_help("the attention mass on the first token (sink score, highest head)")
        + " is above this; between 0 and 1.",
        limit_range=(0.0, 1.0),
        column="sink",
        needs_probs=True,
        log_scale=False,
        compact=8,
        note="sink: attention mass on the first token (mean over queries of P[i, 0]), the highest head.",
    ),
    MetricDef(
        "stable_rank",
        "srank(X_l)",
        "forward",
        "lower",
        "Σσ_i²/σ_1² of X_l (stable rank, between 1 and k)",
        gate="min_stable_rank",
        gate_help=_gate_help("the stable rank Σσ²/σ_1² of X_l") + " is below this.",
        column="srank(X_l)",
        note="srank: stable rank Σσ²/σ_1² of X_l.",
    ),
)

# Per head, in the JSON's order (layers[i].heads_detail[h].<key>) and the per-head table's (``column``): with
# ``--heads`` each layer reports these for every head, medians over samples (a max over the head's groups).


def _per_head(key: str, formula: str) -> MetricDef:
    """The per-layer metric ``key`` as each head's own value: the same label, column, flag and direction; no
    gate (rules judge a layer's worst head) and no conditioned column."""
    m = next(m for m in FORWARD if m.key == key)
    return replace(
        m,
        scope="head",
        formula=formula,
        gate=None,
        gate_help="",
        conditioned_column=False,
        headline=False,
        compact=None,
        compact_conditioned=None,
    )


HEAD: tuple[MetricDef, ...] = (
    _per_head("mu_la", "κ(W_Q^h)κ(W_K^h)κ(W_V^h)κ(A_l)³ of this head (Proposition 4.2)"),
    MetricDef(
        "kappa_la",
        "κ(LA) actual",
        "head",
        "higher",
        "κ(LA(A_l)) = κ(A_l W_Q^h W_K^hᵀ A_lᵀ A_l W_V^h) as the model computes it (q, k rotated where it "
        "rotates)",
        column="κ(LA) actual",
    ),
    _per_head(
        "mu_a", "κ(P)κ(A_l)κ(W_V^h) of this head (κ(M) in place of κ(P) where the layer mixes with M ≠ P)"
    ),
    _per_head("kappa_probs", "σ_1/σ_min(q,k) of this head's P, the worst group"),
    _per_head(
        "kappa_mixing", "σ_1/σ_min(q,k) of this head's mixing matrix M where it is not P, the worst group"
    ),
    _per_head("attention_entropy", "this head's normalised attention entropy (1 = uniform, 0 = one key)"),
    _per_head("sink", "this head's mean attention mass on the first key (≥ 0.9: a sink head)"),
    MetricDef(
        "kappa_la_unrotated",
        "κ(LA) unrotated",
        "head",
        "higher",
        "κ(LA(A_l)) of the unrotated projections, the one μ(LA) bounds (models that rotate q and k only)",
        needs_rotation=True,
    ),
)
ALL: tuple[MetricDef, ...] = (*EMBEDDING, *TABLE, *WEIGHTS, *FORWARD)
HEADLINE: tuple[MetricDef, ...] = tuple(m for m in FORWARD if m.headline)  # κ(X_l), μ(LA), H(P)
GATES: dict[str, MetricDef] = {m.gate: m for m in ALL if m.gate is not None}  # rule name → metric
FLAGS: tuple[str, ...] = tuple(dict.fromkeys(m.flag for m in FORWARD if m.flag is not None))
# what a flag's samples hold
FLAG_SUBJECT: dict[str, str] = {
    "x": "X_l",
    "x_distinct": "the distinct rows of X_l",
    "attn_input": "A_l",
    "probs": "P",
    MIXING_FLAG: "M",
}
# the flags whose matrices can have exactly repeated rows (κ = inf, not a floor: docs/math.md#repeated-rows)
ROW_FLAGS: tuple[str, ...] = ("x", "attn_input")


def with_weights(forward: tuple[MetricDef, ...]) -> tuple[MetricDef, ...]:
    """The per-layer table's order: the forward metrics with the κ(W) columns right after κ(A_l) (what μ is
    made of, side by side)."""
    at = next(i for i, m in enumerate(forward) if m.key == "kappa_attn_input") + 1
    return (*forward[:at], *WEIGHTS, *forward[at:])


def flag_of(metric: MetricDef, mixing: bool) -> str | None:
    """The below-precision flag that qualifies ``metric`` in a layer (``mixing``: it mixes with M ≠ P)."""
    return MIXING_FLAG if mixing and metric.flag_mixing else metric.flag


def forward(key: str) -> MetricDef:
    """The per-layer metric with this key."""
    return next(m for m in FORWARD if m.key == key)


def column_notes(keys: Iterable[str]) -> list[str]:
    """The footnotes of the forward metrics whose columns a table shows (``keys``; a conditioned column's key
    ``conditioned.<key>`` counts as its metric's), in registry order: none for a column not shown."""
    shown = {k.removeprefix("conditioned.") for k in keys}
    return [m.note for m in FORWARD if m.note and m.key in shown]
