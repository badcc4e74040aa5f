"""Aggregation of per-sample results over a stream of batches (docs/math.md#aggregation).

Batches are appended in stream order and every statistic is computed once, at the end, from the
concatenated per-sample values. So the result depends only on the samples and never on how they were split
into batches (tests/test_aggregate.py checks splits of 1, 3 and all for exact equality).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from condcli.errors import InputError, InternalError
from condcli.spectra.uncertainty import STATISTICS, statistic_rel


def json_float(v: float) -> float | str:
    """A float for JSON: ``inf`` stays infinite as the string "inf" (docs/math.md#aggregation); NaN is a
    bug."""
    if math.isnan(v):
        raise InternalError("a NaN reached the report", "report this as a bug")
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _floats(values: torch.Tensor | np.ndarray[Any, Any] | Sequence[float]) -> np.ndarray[Any, Any]:
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def check_fields(obj: object, known: set[str]) -> None:
    """Refuse to merge an accumulator across processes that holds a field its merge does not know: a field
    added later is never silently left out of a torchrun report."""
    extra = set(vars(obj)) - known
    if extra:
        raise InternalError(
            f"{type(obj).__name__} has fields {sorted(extra)} that its export_shard does not merge",
            "run in one process (without torchrun), and report it",
        )


class ShardOrder(Protocol):
    """Where each process's samples go in the one stream (:class:`condcli.analysis.gather.Order`)."""

    def rows(self, parts: Sequence[Sequence[Any]], what: str) -> list[Any]:
        """Per-sample items of every process, in stream order."""
        ...

    def positions(self, parts: Sequence[Sequence[int]]) -> list[int]:
        """Sample positions each process counted locally, as stream positions."""
        ...


@dataclass(frozen=True)
class Aggregate:
    """One per-sample quantity over all samples: summary statistics and the full list, in sample order."""

    median: float
    mean: float
    min: float
    max: float
    per_sample: tuple[float, ...]
    inf_count: int
    # per sample, whether the value is only a floor (the true value is ≥ it: docs/math.md#spectra); None for
    # quantities that are never floors. JSON then adds "floor_count", "per_sample_floor" and "floor" (per
    # statistic).
    per_sample_floor: tuple[bool, ...] | None = None
    # per sample, the relative uncertainty r of the value from the capture's rounding (tol/σ_k by Weyl, see
    # condcli.spectra.uncertainty; inf for a floor); None where it is not tracked. JSON: "rel_uncertainty".
    per_sample_uncertainty: tuple[float, ...] | None = None
    # per sample, whether the value is only a ceiling: the quantity is below the capture's resolution and the
    # value is that resolution (σ_min ≤ tol = u·‖X‖_F, printed "< tol"); None for quantities never ceilings.
    # JSON then adds "ceiling_count", "per_sample_ceiling" and "ceiling" (per statistic).
    per_sample_ceiling: tuple[bool, ...] | None = None
    # per sample, whether the value is exactly 0 by structure (σ_min of a matrix with fewer distinct rows than
    # k: repeated rows force it), not by measurement; None where not tracked. JSON: "zero_count",
    # "per_sample_zero".
    per_sample_zero: tuple[bool, ...] | None = None

    @property
    def count(self) -> int:
        return len(self.per_sample)

    @property
    def floor_count(self) -> int:
        return sum(self.per_sample_floor or ())

    @property
    def ceiling_count(self) -> int:
        return sum(self.per_sample_ceiling or ())

    @property
    def zero_count(self) -> int:
        return sum(self.per_sample_zero or ())

    def is_ceiling(self, statistic: str) -> bool:
        """Whether ``statistic`` is itself only a ceiling (the true value is at most it, "< x"): lowering the
        ceiling samples to their unknown true values (each in [0, its value]) could lower it.

        mean and min: a ceiling above 0. max: some ceiling is at or above the largest measurement. median:
        some ceiling is at or above the lower middle value."""
        marks = self.per_sample_ceiling
        if not marks or not any(marks):
            return False
        v = np.asarray(self.per_sample)
        c = np.asarray(marks, dtype=bool)
        if statistic in ("mean", "min"):
            return bool((v[c] > 0).any()) and (statistic == "mean" or float(v.min()) > 0)
        if statistic == "max":
            return bool(c.all()) or float(v[c].max()) >= float(v[~c].max())
        if statistic == "median":
            lower = float(np.sort(v)[(v.size - 1) // 2])
            return bool((v[c] >= lower).any())
        raise InternalError(f"unknown statistic {statistic!r}", "report this as a bug")

    def is_floor(self, statistic: str) -> bool:
        """Whether ``statistic`` (median, mean, min, max) is itself only a floor: raising the floor samples
        to their unknown true values (each ≥ its floor) could raise it.

        mean and max: any floor. min: some floor is at or below the smallest measurement. median: some floor
        is at or below the upper middle value (a floor above it can rise without moving the median).
        """
        floors = self.per_sample_floor
        if not floors or not any(floors):
            return False
        if statistic in ("mean", "max"):
            return True
        v = np.asarray(self.per_sample)
        f = np.asarray(floors, dtype=bool)
        if statistic == "min":
            return bool(f.all()) or float(v[f].min()) <= float(v[~f].min())
        if statistic == "median":
            upper = float(np.sort(v)[v.size // 2])
            return bool((v[f] <= upper).any())
        raise InternalError(f"unknown statistic {statistic!r}", "report this as a bug")

    def uncertainty(self, statistic: str) -> float | None:
        """The relative uncertainty of ``statistic`` from the per-sample ones (None where not tracked): the
        statistic of the samples' lower and upper ends (:func:`condcli.spectra.uncertainty.statistic_rel`)."""
        if self.per_sample_uncertainty is None:
            return None
        return statistic_rel(
            self.per_sample,
            self.per_sample_uncertainty,
            self.per_sample_floor,
            statistic,
            STATISTICS[statistic],
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "median": json_float(self.median),
            "mean": json_float(self.mean),
            "min": json_float(self.min),
            "max": json_float(self.max),
            "per_sample": [json_float(v) for v in self.per_sample],
            "inf_count": self.inf_count,
        }
        if self.per_sample_floor is not None:
            out["floor_count"] = self.floor_count
            out["floor"] = {s: self.is_floor(s) for s in ("median", "mean", "min", "max")}
            out["per_sample_floor"] = list(self.per_sample_floor)
        if self.per_sample_uncertainty is not None:
            rel: dict[str, Any] = {s: json_float(self.uncertainty(s) or 0.0) for s in STATISTICS}
            rel["per_sample"] = [json_float(r) for r in self.per_sample_uncertainty]
            out["rel_uncertainty"] = rel
        if self.per_sample_ceiling is not None:
            out["ceiling_count"] = self.ceiling_count
            out["ceiling"] = {s: self.is_ceiling(s) for s in ("median", "mean", "min", "max")}
            out["per_sample_ceiling"] = list(self.per_sample_ceiling)
        if self.per_sample_zero is not None:
            out["zero_count"] = self.zero_count
            out["per_sample_zero"] = list(self.per_sample_zero)
        return out


def aggregate(
    values: torch.Tensor | np.ndarray[Any, Any] | Sequence[float],
    floors: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool] | None = None,
    uncertainty: torch.Tensor | np.ndarray[Any, Any] | Sequence[float] | None = None,
    *,
    ceilings: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool] | None = None,
    zeros: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool] | None = None,
) -> Aggregate:
    """Median, mean (exactly rounded, ``math.fsum``), min, max, the list and the count of ``inf`` values;
    ``floors`` (per sample, optional) marks the values that are only floors (:attr:`Aggregate.is_floor`),
    ``uncertainty`` (per sample, optional) their relative uncertainties (:meth:`Aggregate.uncertainty`),
    ``ceilings`` those only ceilings (:meth:`Aggregate.is_ceiling`), ``zeros`` those exactly 0
    by structure."""
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
        per_sample_floor=None if floors is None else tuple(bool(b) for b in _bools(floors, v.size)),
        per_sample_uncertainty=None if uncertainty is None else _relative(uncertainty, v.size),
        per_sample_ceiling=None if ceilings is None else tuple(_bools(ceilings, v.size)),
        per_sample_zero=None if zeros is None else tuple(_bools(zeros, v.size)),
    )


def _relative(values: torch.Tensor | np.ndarray[Any, Any] | Sequence[float], n: int) -> tuple[float, ...]:
    r = _floats(values)
    if r.size != n or np.isnan(r).any() or (r < 0).any():
        raise InternalError(f"{r.size} uncertainties for {n} values, or one not ≥ 0", "report this as a bug")
    return tuple(r.tolist())


def _bools(flags: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool], n: int) -> list[bool]:
    if isinstance(flags, torch.Tensor):
        flags = flags.detach().cpu().numpy()
    out = np.asarray(flags, dtype=bool).reshape(-1)
    if out.size != n:
        raise InternalError(f"{out.size} floor flags for {n} values", "report this as a bug")
    return [bool(b) for b in out]


class ScalarStream:
    """Collects one per-sample quantity batch by batch; :meth:`result` aggregates it."""

    def __init__(self, *, floors: bool = False, ceilings: bool = False) -> None:
        self._chunks: list[np.ndarray[Any, Any]] = []
        self._floors: list[np.ndarray[Any, Any]] | None = [] if floors else None
        # relative uncertainties, kept while every batch gives them (streams with floors); None once one
        # batch does not
        self._uncertainty: list[np.ndarray[Any, Any]] | None = [] if floors else None
        # ceiling and exact-zero marks (σ_min: "< tol", or 0 where repeated rows force it)
        self._ceilings: list[np.ndarray[Any, Any]] | None = [] if ceilings else None
        self._zeros: list[np.ndarray[Any, Any]] | None = [] if ceilings else None

    def extend(
        self,
        batch: torch.Tensor | np.ndarray[Any, Any] | Sequence[float],
        floors: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool] | None = None,
        uncertainty: torch.Tensor | np.ndarray[Any, Any] | Sequence[float] | None = None,
        *,
        ceilings: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool] | None = None,
        zeros: torch.Tensor | np.ndarray[Any, Any] | Sequence[bool] | None = None,
    ) -> None:
        """Append values; on a stream made with ``floors=True``, ``floors`` marks those only floors
        (default: none of them) and ``uncertainty`` gives their relative uncertainties (a batch without
        them ends the stream's tracking: its aggregate then has none); on one made with ``ceilings=True``,
        ``ceilings`` and ``zeros`` mark the values only ceilings and those exactly 0 (default: none)."""
        values = _floats(batch)
        self._chunks.append(values)
        for kept, given in ((self._ceilings, ceilings), (self._zeros, zeros)):
            if kept is not None:
                kept.append(
                    np.zeros(values.size, bool) if given is None else np.asarray(_bools(given, values.size))
                )
        if self._floors is not None:
            marks = np.zeros(values.size, bool) if floors is None else np.asarray(_bools(floors, values.size))
            self._floors.append(marks)
        if self._uncertainty is not None:
            if uncertainty is None:
                self._uncertainty = None
            else:
                self._uncertainty.append(np.asarray(_relative(uncertainty, values.size)))

    def __len__(self) -> int:
        return sum(c.size for c in self._chunks)

    def export_shard(self) -> dict[str, list[Any] | None]:
        """Every per-sample list the stream keeps (values, floor marks, uncertainties), as plain lists; None
        for a quantity it does not keep."""
        out: dict[str, list[Any] | None] = {}
        for name, chunks in vars(self).items():
            if chunks is not None and not isinstance(chunks, list):
                raise InternalError(f"ScalarStream.{name} cannot be gathered across processes", "report it")
            out[name] = None if chunks is None else [v for c in chunks for v in np.asarray(c).reshape(-1)]
        return out

    def absorb_shards(
        self, parts: Sequence[dict[str, list[Any] | None]], order: ShardOrder, what: str
    ) -> None:
        """Every process's :meth:`export_shard`, in sample order (a quantity one of them lacks: none)."""
        for name in vars(self):
            got = [p[name] for p in parts]
            if any(g is None for g in got):
                setattr(self, name, None)
                continue
            rows = order.rows([g for g in got if g is not None], f"{what} {name}")
            setattr(self, name, [np.asarray(rows)] if rows else [])

    def result(self) -> Aggregate:
        values = np.concatenate(self._chunks) if self._chunks else np.empty(0)
        marks = {
            name: None if chunks is None else (np.concatenate(chunks) if chunks else np.empty(0, bool))
            for name, chunks in (("ceilings", self._ceilings), ("zeros", self._zeros))
        }
        if self._floors is None:
            return aggregate(values, **marks)
        floors = np.concatenate(self._floors) if self._floors else np.empty(0, bool)
        if self._uncertainty is None:
            return aggregate(values, floors, **marks)
        rel = np.concatenate(self._uncertainty) if self._uncertainty else np.empty(0)
        return aggregate(values, floors, rel, **marks)
