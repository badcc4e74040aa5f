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

import torch

from condcli import __version__
from condcli.reports.metrics import EMBEDDING, FLAGS, FORWARD, HEAD, ROW_FLAGS, WEIGHTS, MetricDef, flag_of
from condcli.reports.refusal import split as split_refusal
from condcli.reports.schema import SCHEMA_VERSION
from condcli.reports.table import EmbeddingTableReport
from condcli.reports.views import ReportViews
from condcli.spectra import COLLAPSED_HEAD, SINK_HEAD, SINK_SKIP, Aggregate, SpectrumBand, json_float


def _agg(a: Aggregate | None) -> dict[str, Any] | None:
    return None if a is None else a.to_json()


@dataclass(frozen=True)
class ModelInfo:
    spec: str  # what the user (or the default) named
    model_from: str  # "command line", "pyproject.toml [tool.condcli]", "default sample"
    family: str
    source: str  # timm | hf | local
    weights: str  # pretrained | random | file
    num_layers: int
    device_map: Mapping[str, Any] | None = None  # spread over devices (--device-map): strategy, budgets, map
    quantization: Mapping[str, Any] | None = None  # a GGUF file's storage types (weights dequantized from …)

    @property
    def weights_label(self) -> str:
        """What the weights are, as far as condcli knows: a folder's are "weights from FOLDER" (a saved
        random init is not "pretrained"), a checkpoint's "weights from the checkpoint"."""
        if self.weights == "file":
            return "weights from the checkpoint"
        if self.model_from == "in memory":
            return "weights in memory"
        if self.source == "local" and self.weights == "pretrained":
            return f"weights from {self.spec}"
        return f"{self.weights} weights"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "spec": self.spec,
            "from": self.model_from,
            "family": self.family,
            "source": self.source,
            "weights": self.weights,
            "num_layers": self.num_layers,
            "weights_label": self.weights_label,
        }
        if self.quantization is not None:
            out["quantization"] = dict(self.quantization)
        if self.device_map is not None:
            out["device_map"] = dict(self.device_map)
        return out


@dataclass(frozen=True)
class InputsInfo:
    kind: str  # images | text | synthetic
    description: str
    preprocessing: str
    count: int  # samples analysed
    tokens: int  # N: the longest sample's token count
    dim: int  # d
    skipped: int  # unreadable files skipped

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "preprocessing": self.preprocessing,
            "count": self.count,
            "tokens": self.tokens,
            "dim": self.dim,
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class Settings:
    lam: float
    dtype: str
    device: str
    seed: int
    conditioned_forward: bool
    heads: bool
    target_kappa: float | None = None  # sweep-lambda only

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "lambda": self.lam,
            "dtype": self.dtype,
            "device": self.device,
            "seed": self.seed,
            "conditioned_forward": self.conditioned_forward,
            "heads": self.heads,
        }
        if self.target_kappa is not None:
            out["target_kappa"] = self.target_kappa
        return out


# the aggregates of the embedding section, in the JSON's order: the registry's embedding metrics and the
# statistics beside them (σ, the numerical rank, the Weyl bound, the distinct rows and all rows per sample)
EMBEDDING_STATS: tuple[str, ...] = (
    "distinct_rows",
    "rows",
    "sigma_max",
    "sigma_min",
    "numerical_rank",
    "weyl_bound",  # (σ_1 + λ)/(λ − σ_1) per sample, inf where λ ≤ σ_1
)
EMBEDDING_KEYS: tuple[str, ...] = (*(m.key for m in EMBEDDING), *EMBEDDING_STATS)


@dataclass(frozen=True)
class EmbeddingReport:
    """X over all samples (docs/math.md#spectra): κ, κ over the distinct rows, κ(X + λI_k), κ(X + C), σ,
    numerical rank and the spectra: ``values`` by key (:data:`EMBEDDING_KEYS`), also as attributes
    (``report.embedding.kappa``)."""

    where: str
    description: str
    after_position_encoding: bool
    model_conditioning: str | None  # the model's own shift at X (trained with conditioned tokens)
    capture_dtype: str
    exact_lookup: bool  # X is the stored token embeddings gathered by the ids: no rounding from capture_dtype
    k: int  # min(N, d) of the largest sample
    values: Mapping[str, Aggregate]
    below_precision_samples: tuple[int, ...]  # sample indices whose σ_k ≤ tol (docs/math.md#spectra)
    spectrum: SpectrumBand | None  # None in reports that do not carry spectra (sweep-lambda)
    spectrum_conditioned: SpectrumBand | None
    # samples whose X has fewer distinct rows than k (repeated tokens): κ(X) = inf exactly, not a floor
    repeated_rows_samples: tuple[int, ...] = ()

    def __getattr__(self, key: str) -> Aggregate:
        """An aggregate by its key as an attribute (``embedding.kappa_distinct``), as in a notebook."""
        if key in EMBEDDING_KEYS and key in self.__dict__.get("values", {}):
            return self.values[key]
        raise AttributeError(f"{type(self).__name__} has no {key!r}")

    @property
    def distinct_below_precision(self) -> int:
        """Samples whose distinct rows are below resolution: κ_distinct's floors."""
        return self.values["kappa_distinct"].floor_count

    @property
    def resolution_dtype(self) -> str:
        """The dtype whose rounding sets the below-precision flag and numerical rank of X
        (docs/math.md#spectra)."""
        return "float64" if self.exact_lookup else self.capture_dtype

    def repeated_reason(self) -> str | None:
        """Why κ(X) is inf in some samples, where repeated rows are the cause ("26 distinct of 28 rows:
        repeated tokens; …"), naming the first such sample; None where no sample repeats a row."""
        if not self.repeated_rows_samples:
            return None
        i = self.repeated_rows_samples[0]
        r, n = int(self.values["distinct_rows"].per_sample[i]), int(self.values["rows"].per_sample[i])
        where = "" if self.after_position_encoding else "; X carries no positions (" + _positions(self) + ")"
        return f"{r} distinct of {n} rows: repeated tokens{where}"

    def sigma_min_reason(self) -> str | None:
        """Why σ_min is not a measurement in some samples (docs/math.md#spectra-below-resolution):
        "exactly 0 in 1/1 samples: 10 distinct of 17 rows: repeated tokens", "< tol in 2/2 samples: below
        float32 resolution (σ_k ≤ tol = u·‖X‖_F)"; None where every sample's σ_min is measured."""
        a = self.values.get("sigma_min")
        if a is None:
            return None
        parts = []
        if a.zero_count:
            parts.append(f"exactly 0 in {a.zero_count}/{a.count} samples: {self.repeated_reason()}")
        if a.ceiling_count:
            parts.append(
                f"< tol in {a.ceiling_count}/{a.count} samples: below {self.resolution_dtype} resolution "
                "(σ_k ≤ tol = u·‖X‖_F)"
            )
        return "; ".join(parts) or None

    def to_json(self) -> dict[str, Any]:
        v = self.values
        out: dict[str, Any] = {
            "where": self.where,
            "description": self.description,
            "after_position_encoding": self.after_position_encoding,
            "model_conditioning": self.model_conditioning,
            "capture_dtype": self.capture_dtype,
            "exact_lookup": self.exact_lookup,
            "resolution_dtype": self.resolution_dtype,
            "k": self.k,
            **{key: v[key].to_json() for key in EMBEDDING_KEYS if key in v and key != "weyl_bound"},
            "below_precision": len(self.below_precision_samples),
            "below_precision_samples": list(self.below_precision_samples),
            "distinct_below_precision": self.distinct_below_precision,
            "repeated_rows": len(self.repeated_rows_samples),
            "repeated_rows_samples": list(self.repeated_rows_samples),
            "repeated_rows_reason": self.repeated_reason(),
            "weyl_bound": v["weyl_bound"].to_json(),
        }
        if "sigma_min" in out:
            out["sigma_min"]["reason"] = self.sigma_min_reason()
        if self.spectrum is not None and self.spectrum_conditioned is not None:
            out["spectrum"] = self.spectrum.to_json()
            out["spectrum_conditioned"] = self.spectrum_conditioned.to_json()
        return out


def _positions(e: EmbeddingReport) -> str:
    """Where the model's positions enter instead, from X's description ("rotary inside attention")."""
    text = e.description.lower()
    for word in ("rotary", "alibi", "relative"):
        if word in text:
            return f"{'ALiBi' if word == 'alibi' else word} inside attention"
    return "positions enter inside attention"


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


def envelope(command: str) -> dict[str, Any]:
    """The keys every report starts with (``tool.torch``: the PyTorch that ran the model, for baselines)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "condcli", "version": __version__, "torch": torch.__version__},
        "command": command,
    }


def analysis_header(
    command: str, model: ModelInfo, inputs: InputsInfo, settings: Settings, embedding: EmbeddingReport
) -> dict[str, Any]:
    """The envelope plus the sections every analysis report shares (docs/math.md#json), in contract order."""
    return {
        **envelope(command),
        "model": model.to_json(),
        "inputs": inputs.to_json(),
        "settings": settings.to_json(),
        "embedding": embedding.to_json(),
    }


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
    """One entry of ``layers_refused`` (SPEC §7): ``reason`` as {code, text}; ``refused`` keeps the sentence.
    A reason without a code is the first batch's proof contradicting the Q/K/V reading: qkv-unreadable."""
    code, text = split_refusal(why)
    return {
        "index": index,
        "name": name,
        "qkv_source": "generic (unverified)",
        "refused": text,
        "reason": {"code": code or "qkv-unreadable", "text": text},
    }


@dataclass(frozen=True)
class SweepLayer:
    """κ(X_l) of one layer in the conditioned forward at every λ of the grid, and in the plain forward."""

    index: int
    name: str
    kappa_median: tuple[float, ...]  # per λ: median over samples of κ(X_l) with X + λI_k fed on
    kappa_plain_median: float  # median κ(X_l) of the plain forward
    below_precision: tuple[int, ...]  # per λ: samples whose X_l is below the capture dtype's resolution
    below_precision_plain: int

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "kappa_median": [json_float(v) for v in self.kappa_median],
            "kappa_plain_median": json_float(self.kappa_plain_median),
            "below_precision": list(self.below_precision),
            "below_precision_plain": self.below_precision_plain,
        }


@dataclass(frozen=True)
class SweepResult:
    """κ(X + λI_k) over a λ grid (per λ: statistics over samples) and what it recommends."""

    lambdas: tuple[float, ...]  # ascending
    kappa_median: tuple[float, ...]  # per λ, over samples (np.percentile, linear)
    kappa_p10: tuple[float, ...]
    kappa_p90: tuple[float, ...]
    kappa_inf_count: tuple[int, ...]  # per λ: samples whose X + λI_k is numerically singular
    weyl_bound: tuple[float, ...]  # per λ: median of (σ_1+λ)/(λ−σ_1); inf where λ ≤ σ_1 (no bound)
    supplement_estimate: tuple[float, ...]  # per λ: median of (σ_1+λ)/(λ−σ_k), an estimate, not a bound
    weyl_lambda_for_target: float  # median over samples of σ_1(t+1)/(t−1)
    kappa_corrected: float  # median κ(X + C), Theorem 4.4 (≤ 2)
    kappa_plain: float  # median κ(X)
    recommended_lambda: float | None  # smallest grid λ whose median κ ≤ target; None: none in range
    recommendation: str  # one line: the recommended λ, or why none and what to try
    target_kappa: float
    layers: tuple[SweepLayer, ...] | None  # None: no layers asked for

    def to_json(self) -> dict[str, Any]:
        rec = self.recommended_lambda
        return {
            "lambdas": [json_float(v) for v in self.lambdas],
            "kappa": {
                "median": [json_float(v) for v in self.kappa_median],
                "p10": [json_float(v) for v in self.kappa_p10],
                "p90": [json_float(v) for v in self.kappa_p90],
                "inf_count": list(self.kappa_inf_count),
            },
            "weyl_bound": [json_float(v) for v in self.weyl_bound],
            "supplement_estimate": [json_float(v) for v in self.supplement_estimate],
            "weyl_lambda_for_target": json_float(self.weyl_lambda_for_target),
            "kappa_corrected": json_float(self.kappa_corrected),
            "kappa_plain": json_float(self.kappa_plain),
            "recommended_lambda": None if rec is None else json_float(rec),
            "recommendation": self.recommendation,
            "target_kappa": json_float(self.target_kappa),
            "layers": None if self.layers is None else [layer.to_json() for layer in self.layers],
        }


@dataclass(frozen=True)
class SweepReport(ReportViews):
    """What ``condcli sweep-lambda`` found."""

    model: ModelInfo
    inputs: InputsInfo
    settings: Settings
    embedding: EmbeddingReport  # without spectrum bands
    sweep: SweepResult
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            **analysis_header("sweep-lambda", self.model, self.inputs, self.settings, self.embedding),
            "sweep": self.sweep.to_json(),
            "notes": list(self.notes),
        }
