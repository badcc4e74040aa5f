"""The report of ``condcli rank-decay`` (docs/math.md#rank-decay, #json): the cumulative spectra of P per
layer and head.

Every quantity is over all P matrices of a layer (samples × windows × heads); ``per_sample`` gives each
sample's median over its windows and heads so the JSON stays small (docs/math.md#aggregation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condcli.reports.envelope import EmbeddingReport, InputsInfo, ModelInfo, Settings, analysis_header
from condcli.reports.spectrum import ConditionedForward
from condcli.reports.views import ReportViews
from condcli.spectra import SpectrumBand, json_float

THRESHOLD = 0.9  # "rank at 90%": the fewest singular values holding 90% of Σσ


@dataclass(frozen=True)
class MatrixAggregate:
    """One quantity over every P matrix of a layer (or of one head)."""

    median: float
    mean: float
    min: float
    max: float
    per_sample: tuple[float, ...]  # each sample's median over its windows (and heads)
    matrices: int  # how many P matrices the statistics are over

    def to_json(self) -> dict[str, Any]:
        return {
            "median": json_float(self.median),
            "mean": json_float(self.mean),
            "min": json_float(self.min),
            "max": json_float(self.max),
            "per_sample": [json_float(v) for v in self.per_sample],
            "inf_count": 0,  # c, ranks and erank of a finite P are always finite
            "matrices": self.matrices,
        }


@dataclass(frozen=True)
class RankHead:
    head: int
    cumulative_median: tuple[float, ...]  # c_j per index, median over samples and windows
    at_m: MatrixAggregate  # c_m over samples and windows
    rank90: MatrixAggregate
    erank: MatrixAggregate

    def to_json(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "cumulative": {"median": [json_float(v) for v in self.cumulative_median]},
            "at_m": self.at_m.to_json(),
            "rank90": self.rank90.to_json(),
            "erank": self.erank.to_json(),
        }


def _band(b: SpectrumBand) -> dict[str, Any]:
    return {**b.to_json(), "count": list(b.count)}


@dataclass(frozen=True)
class RankLayer:
    """The rank decay of one layer's attention probabilities."""

    index: int
    name: str
    attention: str  # what P is: "softmax over all tokens", "softmax in 7×7 windows", XCA over channels, …
    approximation: bool  # P approximates softmax attention (Nyströmformer)
    heads: int
    n: int  # singular values per P (its size; the longest sample's for text)
    index_m: int  # the index the heatmap and ``at_m`` read c at (counted from 1)
    samples: int
    cumulative: SpectrumBand  # c_j per index over all matrices; past a shorter sample's n, c = 1
    sigma: SpectrumBand  # σ_j of P per index over the matrices that have a j-th value
    at_m: MatrixAggregate
    heads_at_m: tuple[float, ...]  # per head: median c_m over samples and windows (the heatmap row)
    rank90: MatrixAggregate
    erank: MatrixAggregate  # RankMe effective rank of P (docs/math.md#ranks)
    heads_detail: tuple[RankHead, ...] | None  # with heads=True

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "attention": self.attention,
            "approximation": self.approximation,
            "heads": self.heads,
            "n": self.n,
            "index_m": self.index_m,
            "samples": self.samples,
            "cumulative": _band(self.cumulative),
            "sigma": _band(self.sigma),
            "at_m": self.at_m.to_json(),
            "heads_at_m": [json_float(v) for v in self.heads_at_m],
            "heads_at_m_spread": {
                "min": json_float(min(self.heads_at_m)),
                "max": json_float(max(self.heads_at_m)),
            },
            "rank90": self.rank90.to_json(),
            "erank": self.erank.to_json(),
            "heads_detail": None if self.heads_detail is None else [h.to_json() for h in self.heads_detail],
        }


@dataclass(frozen=True)
class RankDecayResult:
    """All chosen layers of one forward (plain, or with the embedding fix applied)."""

    index_m: int | None  # the common m; None when layers of different n each use round(n/4)
    index_rule: str  # "index = 49" (the parameter given) or "round(n/4) per layer"
    threshold: float
    layers: tuple[RankLayer, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "index_m": self.index_m,
            "index_rule": self.index_rule,
            "threshold": self.threshold,
            "layers": [layer.to_json() for layer in self.layers],
        }


@dataclass(frozen=True)
class RankDecayReport(ReportViews):
    """What ``condcli rank-decay`` found."""

    model: ModelInfo
    inputs: InputsInfo
    settings: Settings
    embedding: EmbeddingReport
    rank_decay: RankDecayResult
    rank_decay_conditioned: RankDecayResult | None  # with conditioned=True (λ of lam)
    conditioned_forward: ConditionedForward
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        cond = self.rank_decay_conditioned
        return {
            **analysis_header("rank-decay", self.model, self.inputs, self.settings, self.embedding),
            "rank_decay": self.rank_decay.to_json(),
            "rank_decay_conditioned": None if cond is None else cond.to_json(),
            "conditioned_forward": self.conditioned_forward.to_json(),
            "notes": list(self.notes),
        }
