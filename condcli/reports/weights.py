"""Weight-only reports (docs/math.md#the-embedding-table, #layers): the embedding table's spectrum
(:class:`EmbeddingTableReport`, the ``embedding_table`` key of ``spectrum`` and ``weights`` reports) and what
``condcli weights`` finds per layer without inputs (:class:`WeightsReport`). Nothing here computes; infinite
values are the string "inf" in JSON."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from condcli.reports.spectrum import ModelInfo, WeightKappas, envelope
from condcli.reports.views import ReportViews
from condcli.spectra import json_float
from condcli.spectra._tensor import EPS64


@dataclass(frozen=True)
class TableSpectrum:
    """One stored matrix (a token-embedding table or an output head): its float64 spectrum and κ."""

    name: str  # the parameter, e.g. "model.embed_tokens.weight"
    shape: tuple[int, int]  # (vocab, d)
    kappa: float  # σ_1/σ_k; inf where σ_k ≤ max(V, d)·eps64·σ_1 (below float64 resolution)
    sigma_max: float
    sigma_min: float
    spectrum: tuple[float, ...]  # all k = min(V, d) singular values, descending
    method: str = "gram"  # "gram" (certified Gram path) or "tsqr" (streamed QR, then SVD of R)

    @property
    def resolution(self) -> float:
        """float64's resolution for this matrix: σ ≤ max(V, d)·eps64·σ_1 cannot be told from 0."""
        return max(self.shape) * EPS64 * self.sigma_max

    @property
    def rel_uncertainty(self) -> float | None:
        """The relative uncertainty of a finite κ (resolution/σ_k, the digits it supports); None for inf."""
        if math.isinf(self.kappa) or self.sigma_min <= 0:
            return None
        return self.resolution / self.sigma_min

    @property
    def numerical_rank(self) -> int:
        """How many σ_i are above float64 resolution."""
        return sum(s > self.resolution for s in self.spectrum)

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "kappa": json_float(self.kappa),
            "sigma_max": json_float(self.sigma_max),
            "sigma_min": json_float(self.sigma_min),
            "spectrum": [json_float(v) for v in self.spectrum],
        }


@dataclass(frozen=True)
class EmbeddingTableReport:
    """The token-embedding table E: shape, κ(E), σ_1, σ_k and every σ (descending); ``tied`` whether the
    output head is the same weights (None: the model has no output head); ``lm_head`` the head's own
    spectrum where it is untied."""

    shape: tuple[int, int]
    kappa: float
    sigma_max: float
    sigma_min: float
    spectrum: tuple[float, ...]
    tied: bool | None
    lm_head: TableSpectrum | None
    table: TableSpectrum  # E's (the name, the path that computed it)

    @classmethod
    def of(
        cls, table: TableSpectrum, *, tied: bool | None, lm_head: TableSpectrum | None
    ) -> EmbeddingTableReport:
        return cls(
            table.shape, table.kappa, table.sigma_max, table.sigma_min, table.spectrum, tied, lm_head, table
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.table.to_json(),
            "tied": self.tied,
            "lm_head": None if self.lm_head is None else self.lm_head.to_json(),
        }


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
