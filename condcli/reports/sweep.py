"""The report of ``condcli sweep-lambda``: κ(X + λ·I_k) over a λ grid, its bounds and the recommended λ
(docs/math.md#json); the shared header comes from :mod:`condcli.reports.envelope`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from condcli.reports.envelope import EmbeddingReport, InputsInfo, ModelInfo, Settings, analysis_header
from condcli.reports.views import ReportViews
from condcli.spectra import json_float


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
