"""Weight-only reports (docs/math.md#the-embedding-table, #layers): the embedding table's spectrum
(:class:`EmbeddingTableReport`, the ``embedding_table`` key of ``spectrum`` and ``weights`` reports) and what
``condcli weights`` finds per layer without inputs (:class:`WeightsReport`). Nothing here computes; infinite
values are the string "inf" in JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condcli.reports.envelope import ModelInfo, envelope
from condcli.reports.spectrum import WeightKappas
from condcli.reports.table import EmbeddingTableReport
from condcli.reports.views import ReportViews
from condcli.spectra import json_float


def factor(kq: float, kk: float, kv: float) -> float:
    """μ(LA)'s weight factor κ(W_Q^h)·κ(W_K^h)·κ(W_V^h) (inf where a factor is)."""
    return kq * kk * kv


@dataclass(frozen=True)
class LayerWeights:
    """One attention layer's weight-only numbers: κ of W_Q, W_K, W_V (and W_O where it was found) whole and
    per head, and μ(LA)'s weight factor per head and its max over heads."""

    index: int
    name: str
    heads: int
    kappas: WeightKappas
    qkv_source: str  # "family", "declared", "generic (unverified)" (no forward proves it here)
    wo: float | None  # κ(W_O) of the whole output projection; None: not found
    wo_heads: tuple[float, ...] | None  # κ of each head's d_h × d row block of W_O
    wo_note: str | None  # where W_O was read, or why it is absent

    @property
    def factor_heads(self) -> tuple[float, ...]:
        k = self.kappas
        return tuple(factor(q, kk, v) for q, kk, v in zip(k.wq_heads, k.wk_heads, k.wv_heads, strict=True))

    @property
    def factor_max(self) -> float:
        return max(self.factor_heads)

    def to_json(self) -> dict[str, Any]:
        k = self.kappas
        return {
            "index": self.index,
            "name": self.name,
            "heads": self.heads,
            "kv_heads": k.kv_heads,
            "qkv_source": self.qkv_source,
            "kappa_wq": json_float(k.wq),
            "kappa_wk": json_float(k.wk),
            "kappa_wv": json_float(k.wv),
            "kappa_wo": None if self.wo is None else json_float(self.wo),
            "kappa_wq_heads": [json_float(v) for v in k.wq_heads],
            "kappa_wk_heads": [json_float(v) for v in k.wk_heads],
            "kappa_wv_heads": [json_float(v) for v in k.wv_heads],
            "kappa_wo_heads": None if self.wo_heads is None else [json_float(v) for v in self.wo_heads],
            "wo_source": self.wo_note,
            "weight_factor": json_float(self.factor_max),
            "weight_factor_heads": [json_float(v) for v in self.factor_heads],
        }


@dataclass(frozen=True)
class WeightsReport(ReportViews):
    """What ``condcli weights`` found: the embedding table and every layer's weight κ, without inputs."""

    model: ModelInfo
    streamed: bool  # read tensor by tensor from safetensors files (the model never loaded whole)
    embedding_table: EmbeddingTableReport | None
    layers: tuple[LayerWeights, ...]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            **envelope("weights"),
            "model": self.model.to_json(),
            "settings": {"streamed": self.streamed},
            "embedding_table": None if self.embedding_table is None else self.embedding_table.to_json(),
            "layers": [layer.to_json() for layer in self.layers],
            "notes": list(self.notes),
        }
