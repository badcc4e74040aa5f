"""What every analysis report starts with: the envelope (schema version, tool, command) and the shared
header sections: the model, the inputs, the settings and the embedded tokens X (docs/math.md#json).

Floors and the aggregate keys they add are described in :mod:`condcli.reports.spectrum`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from condcli import __version__
from condcli.reports.metrics import EMBEDDING
from condcli.reports.schema import SCHEMA_VERSION
from condcli.spectra import Aggregate, SpectrumBand


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
    skipped: int  # samples skipped: unreadable files, texts the tokenizer gives no token

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
