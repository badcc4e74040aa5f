"""Spectra over samples (docs/math.md#aggregation, #spectra-below-resolution): per-index median and 10th/90th
percentiles of per-sample spectra, each entry a measurement, exactly 0 (repeated rows force it) or not
resolved (below the capture's resolution). Batch-invariant like :mod:`.aggregate`: rows are kept in stream
order and banded once, at the end."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from condcli.errors import InputError
from condcli.spectra.aggregate import ShardOrder, _floats, json_float


@dataclass(frozen=True)
class SpectrumBand:
    """Spectra over samples: per-index median and 10th/90th percentiles (docs/math.md#aggregation).

    Samples may have different k (text of different lengths): index i aggregates the samples that have an
    i-th singular value, and ``count[i]`` says how many that was.

    Where the band knows its ``resolution`` (docs/math.md#spectra-below-resolution), every entry is a
    measurement (above the resolution), exactly 0 (the samples' repeated rows force it) or NaN (not resolved:
    below the resolution, or between a resolved sample and one that is not). ``resolution`` None: the spectra
    were not judged (every entry is a number as computed).
    """

    median: tuple[float, ...]
    p10: tuple[float, ...]
    p90: tuple[float, ...]
    count: tuple[int, ...]
    resolution: float | None = None  # tol = u·‖X‖_F, the largest over the samples
    reason: str | None = None  # what forces the exact zeros ("10 distinct of 17 rows: repeated tokens")

    def statistics(self) -> dict[str, tuple[float, ...]]:
        return {"median": self.median, "p10": self.p10, "p90": self.p90}

    @property
    def unresolved_from(self) -> int | None:
        """The list offset (0-based) of the first median entry that is not a measurement (0 or NaN), which is
        the number of measured values before it; None where every entry is measured or none was judged."""
        if self.resolution is None:
            return None
        return next((i for i, v in enumerate(self.median) if not v > 0), None)

    @property
    def zero_from(self) -> int | None:
        """The list offset of the first median entry that is exactly 0; None where there is none."""
        if self.resolution is None:
            return None
        return next((i for i, v in enumerate(self.median) if v == 0), None)

    def to_json(self) -> dict[str, Any]:
        if self.resolution is None:
            return {q: [json_float(v) for v in values] for q, values in self.statistics().items()}
        out: dict[str, Any] = {
            q: [None if math.isnan(v) else json_float(v) for v in values]
            for q, values in self.statistics().items()
        }
        out["resolution"] = json_float(self.resolution)
        out["unresolved_from"] = self.unresolved_from
        out["zero_from"] = self.zero_from
        out["unresolved_count"] = {q: sum(not v > 0 for v in vs) for q, vs in self.statistics().items()}
        out["zero_count"] = {q: sum(v == 0 for v in vs) for q, vs in self.statistics().items()}
        out["unresolved_reason"] = self.unresolved_reason()
        return out

    def unresolved_reason(self) -> str | None:
        """What the median's unresolved entries are, e.g. "7 exactly 0 (10 distinct of 17 rows: repeated
        tokens)" or "3 below resolution (σ_i ≤ 2.3e-15)"; None where every entry is measured."""
        if self.resolution is None:
            return None
        zeros = sum(v == 0 for v in self.median)
        below = sum(math.isnan(v) for v in self.median)
        parts = []
        if zeros:
            parts.append(f"{zeros} exactly 0 ({self.reason or 'the rank the repeated rows allow'})")
        if below:
            parts.append(f"{below} below resolution (σ_i ≤ {self.resolution:.2g})")
        return "; ".join(parts) or None


def _table(rows: Sequence[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    k = max(r.size for r in rows)
    table = np.full((len(rows), k), np.nan)
    for i, r in enumerate(rows):
        table[i, : r.size] = r
    return table


def resolved_band(
    table: np.ndarray[Any, Any],
    resolution: float | None = None,
    zero: np.ndarray[Any, Any] | None = None,
    reason: str | None = None,
) -> SpectrumBand:
    """The per-index median, p10 and p90 of ``table`` (samples × index, NaN past a shorter sample's end).

    With a ``resolution``, an entry of a sample is measured where it exceeds the resolution, exactly 0 where
    ``zero`` (same shape, bool) marks it, and not resolved otherwise. A percentile is measured where both
    samples it interpolates between are (then it is numpy's linear percentile of the measurements, as if
    nothing were judged), 0 where both are exact zeros, and NaN otherwise: zeros rank below the unresolved,
    and both below every measurement (docs/math.md#aggregation)."""
    present = ~np.isnan(table)
    count = present.sum(0)
    if resolution is None:
        med, p10, p90 = np.nanpercentile(table, [50, 10, 90], axis=0)
        return SpectrumBand(
            tuple(med.tolist()), tuple(p10.tolist()), tuple(p90.tolist()), tuple(count.tolist())
        )
    zeros = np.zeros(table.shape, bool) if zero is None else (zero & present)
    measured = present & ~zeros & (np.nan_to_num(table, nan=0.0) > resolution)
    keyed = np.where(measured, table, np.where(zeros, -2.0, -1.0))
    keyed[~present] = np.nan
    stats = np.nanpercentile(keyed, [50, 10, 90], axis=0)
    out: list[tuple[float, ...]] = []
    for q, values in zip((50, 10, 90), stats, strict=True):
        h = (count - 1) * q / 100
        lo, hi = np.floor(h), np.ceil(h)
        unresolved = (~measured & present).sum(0)
        exact = zeros.sum(0)
        v = np.where(lo >= unresolved, values, np.where(hi < exact, 0.0, np.nan))
        out.append(tuple(v.tolist()))
    med, p10, p90 = out
    return SpectrumBand(med, p10, p90, tuple(count.tolist()), float(resolution), reason)


def spectrum_band(
    spectra: Iterable[torch.Tensor | np.ndarray[Any, Any] | Sequence[float]],
    tolerances: Sequence[float] | None = None,
    ranks: Sequence[int] | None = None,
    reason: str | None = None,
) -> SpectrumBand:
    """Per-index median, p10 and p90 of descending spectra (ragged lengths allowed). With ``tolerances`` (one
    tol per sample), the band's resolution is the largest and values at or below it are not resolved; with
    ``ranks`` (per sample, the rank its structure allows: its distinct rows), σ_i past that rank are exactly
    0 (:func:`resolved_band`)."""
    rows = [_floats(s) for s in spectra]
    if not rows:
        raise InputError("no spectra to aggregate", "give at least one input sample")
    table = _table(rows)
    if tolerances is None:
        return resolved_band(table)
    zero = None
    if ranks is not None:
        zero = np.arange(table.shape[1])[None, :] >= np.asarray(ranks, dtype=np.int64)[:, None]
    return resolved_band(table, float(max(tolerances)), zero, reason)


class SpectrumStream:
    """Collects per-sample spectra batch by batch ((B, k) tensors or lists of 1-D); :meth:`result` bands.

    ``extend(..., tolerances=, ranks=)`` gives each sample's resolution and the rank its structure allows
    (its distinct rows); a stream given them for every batch bands them as resolved (:func:`spectrum_band`).
    """

    def __init__(self) -> None:
        self._rows: list[np.ndarray[Any, Any]] = []
        self._tolerances: list[float] | None = []
        self._ranks: list[int] | None = []

    def extend(
        self,
        batch: torch.Tensor | Iterable[torch.Tensor | np.ndarray[Any, Any]],
        tolerances: Sequence[float] | None = None,
        ranks: Sequence[int] | None = None,
    ) -> None:
        before = len(self._rows)
        if isinstance(batch, torch.Tensor):
            table = batch.detach().to("cpu", torch.float64).reshape(-1, batch.shape[-1]).numpy()
            self._rows.extend(table)
        else:
            self._rows.extend(_floats(r) for r in batch)
        n = len(self._rows) - before
        if self._tolerances is not None:
            self._tolerances = None if tolerances is None else [*self._tolerances, *_floats(tolerances)[:n]]
        if self._ranks is not None:
            self._ranks = None if ranks is None else [*self._ranks, *(int(r) for r in ranks)]

    def __len__(self) -> int:
        return len(self._rows)

    def export_shard(self) -> list[tuple[np.ndarray[Any, Any], float | None, int | None]]:
        """Per sample: its spectrum, its resolution and its rank cap (None where not given)."""
        tol, ranks = self._tolerances, self._ranks
        return [
            (r, None if tol is None else tol[i], None if ranks is None else ranks[i])
            for i, r in enumerate(self._rows)
        ]

    def absorb_shards(
        self,
        parts: Sequence[list[tuple[np.ndarray[Any, Any], float | None, int | None]]],
        order: ShardOrder,
        what: str,
    ) -> None:
        """Every process's :meth:`export_shard`, in sample order."""
        rows = order.rows(parts, what)
        self._rows = [r for r, _, _ in rows]
        tol = [t for _, t, _ in rows]
        ranks = [k for _, _, k in rows]
        self._tolerances = None if any(t is None for t in tol) else [float(t) for t in tol if t is not None]
        self._ranks = None if any(k is None for k in ranks) else [int(k) for k in ranks if k is not None]

    def result(self, reason: str | None = None) -> SpectrumBand:
        """The band; ``reason``: what forces the exact zeros (:attr:`SpectrumBand.reason`)."""
        return spectrum_band(self._rows, self._tolerances, self._ranks, reason)
