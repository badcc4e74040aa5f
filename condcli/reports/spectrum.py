"""The reports the analysis commands build, as dataclasses, and their JSON form (docs/math.md#json, version
1).

Plots and tables read these (or their JSON); nothing here computes. ``to_json`` gives plain dicts in which
infinite values are the string "inf" (docs/math.md#aggregation).

Floors (docs/math.md#spectra). Where a matrix's σ_k ≤ tol = u·‖X‖_F (u the capture dtype's unit roundoff),
its κ cannot be told from rounding noise: the per-sample value is then the floor σ_1/tol (the true κ is at
least that), never the noise κ. An aggregate of a quantity that can be a floor — ``embedding.kappa``; per
layer ``kappa``, ``kappa_attn_input``, ``mu_la``, ``kappa_probs``, ``kappa_mixing``, ``mu_a`` (plain and
``conditioned``); ``mu_la``, ``mu_a``, ``kappa_probs``, ``kappa_mixing`` in ``heads_detail`` — adds three
keys to ``{median, mean, min, max, per_sample, inf_count}``:

- ``per_sample_floor``: one boolean per sample, true where ``per_sample`` is only a floor. A per-sample max
  over heads or groups is a floor where any of them is (its true value is unbounded above); μ(LA) and μ(A)
  are floors where a κ factor is.
- ``floor_count``: how many samples are floors.
- ``floor``: ``{median, mean, min, max}`` → whether that statistic is itself only a floor, i.e. raising the
  floor samples to their (unknown, larger) true values could raise it: mean and max where any sample is a
  floor; min where a floor is at or below the smallest measurement; median where a floor is at or below the
  upper middle value (floors above it cannot move it). Tables print such a statistic as "≥ 3.1e+04 ⚠".

The ``below_precision`` counts keep their meaning; quantities that are never floors (σ, ranks, κ(X + λI_k),
κ(X + C), κ(W), entropies) carry none of these keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from condcli.reports.envelope import EmbeddingReport, InputsInfo, ModelInfo, Settings, _agg, analysis_header
from condcli.reports.metrics import FLAGS, FORWARD, HEAD, ROW_FLAGS, WEIGHTS, MetricDef, flag_of
from condcli.reports.refusal import split as split_refusal
from condcli.reports.table import EmbeddingTableReport
from condcli.reports.views import ReportViews
from condcli.spectra import COLLAPSED_HEAD, SINK_HEAD, SINK_SKIP, Aggregate, json_float


@dataclass(frozen=True)
class ForwardStats:
    """Per-layer quantities that depend on the forward pass (plain or conditioned), per sample.

    ``values`` holds one aggregate per forward metric of :data:`condcli.reports.metrics.FORWARD` (None: not
    observable for this family, e.g. μ(A) and κ(P) where P cannot be hooked); ``below`` the samples below the
    capture dtype's resolution per flag ("x", "attn_input", "probs"; None where nothing was measured).
    """

    values: Mapping[str, Aggregate | None]
    below: Mapping[str, int | None]
    # samples whose X_l ("x") or A_l ("attn_input") has exactly repeated rows, fewer distinct than k: κ = inf
    repeated: Mapping[str, int] | None = None
    distinct_rows: Aggregate | None = None  # X_l's distinct rows per sample
    rows: Aggregate | None = None  # X_l's rows per sample: the block's own length (less after pooling)

    def __getitem__(self, key: str) -> Aggregate | None:
        return self.values.get(key)

    def below_of(self, metric: MetricDef) -> int | None:
        """Samples whose ``metric`` is only a floor (its flag's count); None for unflagged metrics."""
        flag = flag_of(metric, self.values.get("kappa_mixing") is not None)
        return None if flag is None else self.below.get(flag)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {m.key: _agg(self.values.get(m.key)) for m in FORWARD}
        out["below_precision"] = {flag: self.below.get(flag) for flag in FLAGS}
        if self.repeated is not None:
            out["repeated_rows"] = {flag: self.repeated.get(flag, 0) for flag in ROW_FLAGS}
        if self.distinct_rows is not None:
            out["distinct_rows"] = self.distinct_rows.to_json()
        if self.rows is not None:
            out["rows"] = self.rows.to_json()
        return out


HEAD_KEYS = frozenset(m.key for m in HEAD)


@dataclass(frozen=True)
class HeadReport:
    """One head's per-head metrics (:data:`condcli.reports.metrics.HEAD`), medians etc. over samples:
    ``values`` by
    registry key, None where the layer cannot have it (P not observed, no mixing matrix, no rotation)."""

    head: int
    values: Mapping[str, Aggregate | None]

    def __getitem__(self, key: str) -> Aggregate | None:
        return self.values.get(key)

    def __getattr__(self, key: str) -> Aggregate | None:
        """A metric by its registry key as an attribute (``head.mu_la``), as in a notebook."""
        if key in HEAD_KEYS:
            return self.values.get(key)
        raise AttributeError(f"{type(self).__name__} has no metric {key!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"head": self.head}
        for m in HEAD:
            value = self.values.get(m.key)
            if value is not None or not m.needs_rotation:
                out[m.key] = _agg(value)
        return out


@dataclass(frozen=True)
class WeightKappas:
    """κ of the full d × (H·d_h) projections and of each head's d × d_h slice (model constants), by the
    registry's weight keys (:data:`condcli.reports.metrics.WEIGHTS`: ``kappa_wq``, ``kappa_wk``,
    ``kappa_wv``). Per head, W_K and W_V are the KV slice each query head reads (grouped-query attention)."""

    whole: Mapping[str, float]  # key → κ of the whole projection
    heads: Mapping[str, tuple[float, ...]]  # key → κ per query head
    kv_heads: int | None = None  # key/value heads (fewer than the query heads under GQA); None: unknown

    @property
    def wq(self) -> float:
        return self.whole["kappa_wq"]

    @property
    def wk(self) -> float:
        return self.whole["kappa_wk"]

    @property
    def wv(self) -> float:
        return self.whole["kappa_wv"]

    @property
    def wq_heads(self) -> tuple[float, ...]:
        return self.heads["kappa_wq"]

    @property
    def wk_heads(self) -> tuple[float, ...]:
        return self.heads["kappa_wk"]

    @property
    def wv_heads(self) -> tuple[float, ...]:
        return self.heads["kappa_wv"]

    def to_json(self) -> dict[str, Any]:
        """Each registry weight key, then its per-head list (``<key>_heads``), then ``kv_heads``."""
        out: dict[str, Any] = {m.key: json_float(self.whole[m.key]) for m in WEIGHTS}
        out.update({f"{m.key}_heads": [json_float(v) for v in self.heads[m.key]] for m in WEIGHTS})
        out["kv_heads"] = self.kv_heads
        return out


SINK_NOTE = (
    "sink: attention mass on the first token (mean over queries of P[i, 0]; causal attention: "
    f"queries {SINK_SKIP}… only, as the first see at most {SINK_SKIP} keys), the highest head."
)


def heads_line(
    index: int, name: str, sinks: Sequence[float] | None, entropies: Sequence[float] | None
) -> str | None:
    """One line on a layer's sink and collapsed heads (medians over samples), e.g. "layer 18 model.layers.18:
    6/9 heads are attention sinks (mass ≥ 0.9 on the first token)"; None where it has neither."""
    parts = []
    if sinks:
        n = sum(1 for v in sinks if v >= SINK_HEAD)
        if n:
            parts.append(
                f"{n}/{len(sinks)} heads are attention sinks (mass ≥ {SINK_HEAD:g} on the first token)"
            )
    if entropies:
        n = sum(1 for v in entropies if v < COLLAPSED_HEAD)
        if n:
            parts.append(f"{n}/{len(entropies)} heads collapsed (H(P) < {COLLAPSED_HEAD:g})")
    return f"layer {index} {name}: " + "; ".join(parts) if parts else None


@dataclass(frozen=True)
class LayerReport:
    index: int
    name: str
    attention: str
    heads: int
    approximation: bool
    weights: WeightKappas
    plain: ForwardStats
    heads_detail: tuple[HeadReport, ...] | None  # with per-head detail
    conditioned: ForwardStats | None  # the conditioned forward, when it was run
    probs_note: str | None = None  # why P (and so μ(A), κ(P), H(P)) cannot be observed in this layer
    entropy_heads: tuple[float, ...] | None = None  # per head: median over samples of H(P)
    sink_heads: tuple[float, ...] | None = None  # per head: median over samples of the sink score
    # how Q/K/V were found: "family", "declared", "generic (verified)" or "generic (unverified)"
    qkv_source: str = "family"
    causal: bool = False  # a causal mask: its sink score leaves out the first queries (the table says so)

    def heads_line(self) -> str | None:
        """:func:`heads_line` of this layer."""
        return heads_line(self.index, self.name, self.sink_heads, self.entropy_heads)

    def to_json(self) -> dict[str, Any]:
        w = self.weights
        out: dict[str, Any] = {
            "index": self.index,
            "name": self.name,
            "attention": self.attention,
            "heads": self.heads,
            "approximation": self.approximation,
            **w.to_json(),
        }
        out.update(self.plain.to_json())
        out["probs_note"] = self.probs_note
        out["attention_entropy_heads"] = (
            None if self.entropy_heads is None else [json_float(v) for v in self.entropy_heads]
        )
        out["sink_heads"] = None if self.sink_heads is None else [json_float(v) for v in self.sink_heads]
        out["heads_detail"] = None if self.heads_detail is None else [h.to_json() for h in self.heads_detail]
        out["conditioned"] = None if self.conditioned is None else self.conditioned.to_json()
        out["qkv_source"] = self.qkv_source
        return out


@dataclass(frozen=True)
class ConditionedForward:
    applied: bool
    conditioning: str  # e.g. "X + 10·I_k"
    reason: str | None  # why it was not run

    def to_json(self) -> dict[str, Any]:
        return {"applied": self.applied, "conditioning": self.conditioning, "reason": self.reason}


@dataclass(frozen=True)
class SpectrumReport(ReportViews):
    """What ``condcli spectrum`` found."""

    model: ModelInfo
    inputs: InputsInfo
    settings: Settings
    embedding: EmbeddingReport
    layers: tuple[LayerReport, ...]
    conditioned_forward: ConditionedForward
    notes: tuple[str, ...]
    # layers asked for that yield no number (—): the generic reading of their Q/K/V failed its proof on the
    # first batch; (index, name, why) each
    refused: tuple[tuple[int, str, str], ...] = ()
    # the token-embedding table E and the output head (input-free, docs/math.md#embedding-table); None: the
    # model has no vocabulary table (a ViT)
    embedding_table: EmbeddingTableReport | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **analysis_header("spectrum", self.model, self.inputs, self.settings, self.embedding),
            "layers": [layer.to_json() for layer in self.layers],
            "conditioned_forward": self.conditioned_forward.to_json(),
            "notes": list(self.notes),
            "layers_refused": [refused_json(i, name, why) for i, name, why in self.refused],
            **({} if self.embedding_table is None else {"embedding_table": self.embedding_table.to_json()}),
        }


def refused_json(index: int, name: str, why: str) -> dict[str, Any]:
    """One entry of ``layers_refused`` (docs/math.md#json): ``reason`` as {code, text}; ``refused`` keeps the
    sentence. A reason without a code is the first batch's proof contradicting the Q/K/V reading:
    qkv-unreadable."""
    code, text = split_refusal(why)
    return {
        "index": index,
        "name": name,
        "qkv_source": "generic (unverified)",
        "refused": text,
        "reason": {"code": code or "qkv-unreadable", "text": text},
    }
