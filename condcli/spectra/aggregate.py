"""Aggregation of per-sample results over a stream of batches (SPEC §6).

Batches are appended in stream order and every statistic is computed once, at the end, from the
concatenated per-sample values. So the result depends only on the samples and never on how they were split
into batches (tests/test_aggregate.py checks splits of 1, 3 and all for exact equality).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from condcli.errors import InputError, InternalError


def json_float(v: float) -> float | str:
    """A float for JSON: ``inf`` stays infinite as the string "inf" (SPEC §6); NaN is a bug."""
    if math.isnan(v):
        raise InternalError("a NaN reached the report", "report this as a bug")
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _floats(values: torch.Tensor | np.ndarray[Any, Any] | Sequence[float]) -> np.ndarray[Any, Any]:
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


@dataclass(frozen=True)
class Aggregate:
    """One per-sample quantity over all samples: summary statistics and the full list, in sample order."""

    median: float
    mean: float
    min: float
    max: float
    per_sample: tuple[float, ...]
    inf_count: int

    @property
    def count(self) -> int:
        return len(self.per_sample)

    def to_json(self) -> dict[str, Any]:
        return {
            "median": json_float(self.median),
            "mean": json_float(self.mean),
            "min": json_float(self.min),
            "max": json_float(self.max),
            "per_sample": [json_float(v) for v in self.per_sample],
            "inf_count": self.inf_count,
        }


def aggregate(values: torch.Tensor | np.ndarray[Any, Any] | Sequence[float]) -> Aggregate:
    """Median, mean (exactly rounded, ``math.fsum``), min, max, the list and the count of ``inf`` values."""
    v = _floats(values)
    if v.size == 0:
        raise InputError("no samples to aggregate", "give at least one input sample")
    if np.isnan(v).any():
        raise InternalError("NaN among per-sample values", "report this as a bug")
    return Aggregate(
        median=float(np.median(v)),
        mean=math.fsum(v.tolist()) / v.size,
        min=float(v.min()),
        max=float(v.max()),
        per_sample=tuple(v.tolist()),
        inf_count=int(np.isinf(v).sum()),
    )


@dataclass(frozen=True)
class SpectrumBand:
    """Spectra over samples: per-index median and 10th/90th percentiles (SPEC §6).

    Samples may have different k (text of different lengths): index i aggregates the samples that have an
    i-th singular value, and ``count[i]`` says how many that was.
    """

    median: tuple[float, ...]
    p10: tuple[float, ...]
    p90: tuple[float, ...]
    count: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "median": [json_float(v) for v in self.median],
            "p10": [json_float(v) for v in self.p10],
            "p90": [json_float(v) for v in self.p90],
        }


def spectrum_band(spectra: Iterable[torch.Tensor | np.ndarray[Any, Any] | Sequence[float]]) -> SpectrumBand:
    """Per-index median, p10 and p90 of descending spectra (ragged lengths allowed)."""
    rows = [_floats(s) for s in spectra]
    if not rows:
        raise InputError("no spectra to aggregate", "give at least one input sample")
    k = max(r.size for r in rows)
    table = np.full((len(rows), k), np.nan)
    for i, r in enumerate(rows):
        table[i, : r.size] = r
    count = (~np.isnan(table)).sum(0)
    med, p10, p90 = np.nanpercentile(table, [50, 10, 90], axis=0)
    return SpectrumBand(tuple(med.tolist()), tuple(p10.tolist()), tuple(p90.tolist()), tuple(count.tolist()))


class ScalarStream:
    """Collects one per-sample quantity batch by batch; :meth:`result` aggregates it."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray[Any, Any]] = []

    def extend(self, batch: torch.Tensor | np.ndarray[Any, Any] | Sequence[float]) -> None:
        self._chunks.append(_floats(batch))

    def __len__(self) -> int:
        return sum(c.size for c in self._chunks)

    def result(self) -> Aggregate:
        return aggregate(np.concatenate(self._chunks) if self._chunks else np.empty(0))


class SpectrumStream:
    """Collects per-sample spectra batch by batch ((B, k) tensors or lists of 1-D); :meth:`result` bands."""

    def __init__(self) -> None:
        self._rows: list[np.ndarray[Any, Any]] = []

    def extend(self, batch: torch.Tensor | Iterable[torch.Tensor | np.ndarray[Any, Any]]) -> None:
        if isinstance(batch, torch.Tensor):
            table = batch.detach().to("cpu", torch.float64).reshape(-1, batch.shape[-1]).numpy()
            self._rows.extend(table)
        else:
            self._rows.extend(_floats(r) for r in batch)

    def __len__(self) -> int:
        return len(self._rows)

    def result(self) -> SpectrumBand:
        return spectrum_band(self._rows)
