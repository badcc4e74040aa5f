"""Linformer-style rank decay of the attention probabilities P (docs/math.md#rank-decay): one layer's
accumulator.

Per batch, the singular values of every P (float64, one matrix per LAPACK call spread over the CPU
threads: batch-invariant, docs/math.md#aggregation) are kept; at the end each layer's normalized cumulative
spectra
c_j = Σ_{i≤j} σ_i / Σ σ_i are read at index m, at 90% of the mass (rank90) and through RankMe (erank).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from condcli.adapters.base import LayerSpec
from condcli.analysis.gather import Order
from condcli.analysis.persample import head_chunks, trim
from condcli.errors import InputError
from condcli.reports.rank import THRESHOLD, MatrixAggregate, RankDecayResult, RankHead, RankLayer
from condcli.spectra import (
    SpectrumBand,
    cumulative_spectrum,
    effective_rank_of_spectrum,
    precision_tolerance,
    rank_at_fraction,
    singular_values,
)
from condcli.spectra.bands import resolved_band


def default_index(n: int) -> int:
    """m = round(n/4) (docs/math.md#rank-decay), halves rounded up, at least 1: 49 for ViT-B's n = 197."""
    return max(1, math.floor(n / 4 + 0.5))


def check_index(index: int | None) -> None:
    """``index`` counts singular values from 1."""
    if index is not None and index < 1:
        raise InputError(
            f"`index` must be at least 1 (it counts singular values from 1), got {index}",
            "e.g. `index=49` reads c_49 = the share of Σσ held by the 49 largest singular values",
        )


def check_index_fits(index: int | None, layers: dict[int, RankAccumulator]) -> None:
    """``index`` M must not exceed any chosen layer's n (P has n singular values, so c_M needs M ≤ n)."""
    if index is None:
        return
    for acc in layers.values():
        n = acc.n
        if n and index > n:
            raise InputError(
                f"`index={index}` is larger than n = {n}, the number of singular values of P in layer "
                f"{acc.spec.index} ({acc.spec.attention})",
                f"give `index` between 1 and {n}, or leave it out for round(n/4) per layer",
            )


def sample_spectra(mats: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Singular values of every sample's P stack (G, H, q, k) → (G, H, min(q, k)), float64, on the CPU.

    Samples of equal shape go through :func:`condcli.spectra.singular_values` together, a chunk of heads at
    a time (:func:`condcli.analysis.persample.head_chunks`: a long sequence's P is H × n² numbers per sample).
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, m in enumerate(mats):
        groups.setdefault(tuple(m.shape), []).append(i)
    out: list[torch.Tensor | None] = [None] * len(mats)
    for idx in groups.values():
        chunks = head_chunks([mats[i] for i in idx])
        sigma = torch.cat([singular_values(torch.stack(c)).cpu() for c in chunks], dim=2)  # (S, G, H, r)
        for j, i in enumerate(idx):
            out[i] = sigma[j]
    return [s for s in out if s is not None]


def _matrix_aggregate(values: list[torch.Tensor]) -> MatrixAggregate:
    """``values``: per sample, one value per matrix (any shape)."""
    flat = np.concatenate([v.reshape(-1).numpy() for v in values])
    return MatrixAggregate(
        median=float(np.median(flat)),
        mean=math.fsum(flat.tolist()) / flat.size,
        min=float(flat.min()),
        max=float(flat.max()),
        per_sample=tuple(float(np.median(v.numpy())) for v in values),
        matrices=int(flat.size),
    )


def _band(table: np.ndarray, count: np.ndarray) -> SpectrumBand:
    med, p10, p90 = np.nanpercentile(table, [50, 10, 90], axis=0)
    return SpectrumBand(tuple(med.tolist()), tuple(p10.tolist()), tuple(p90.tolist()), tuple(count.tolist()))


def tolerances(sigma: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """tol = u·‖P‖_F of each P (docs/math.md#spectra) at its capture ``dtype``, from its spectra (..., r)."""
    return precision_tolerance(sigma, shape, dtype)


class RankAccumulator:
    """One layer of one forward: ``add`` each batch's captured P, then ``result``."""

    def __init__(self, spec: LayerSpec, *, per_head: bool) -> None:
        self.spec = spec
        self.per_head = per_head
        self.sigma: list[torch.Tensor] = []  # per sample (G, H, r) descending float64
        self.tol: list[torch.Tensor] = []  # per sample (G, H): each P's resolution u·‖P‖_F

    @property
    def n(self) -> int:
        """Singular values per P (the longest sample's, for text); 0 before any batch."""
        return max((int(s.shape[-1]) for s in self.sigma), default=0)

    @property
    def n_min(self) -> int:
        """The shortest sample's n (less than :attr:`n` for text of different lengths)."""
        return min((int(s.shape[-1]) for s in self.sigma), default=0)

    def add(self, probs: torch.Tensor, lengths: torch.Tensor | None) -> None:
        """``probs`` (B, G, H, q, k); padding tokens are cut from q and k per sample."""
        mats = trim(probs, lengths, (2, 3))
        for m, sigma in zip(mats, sample_spectra(mats), strict=True):
            self.sigma.append(sigma)
            self.tol.append(tolerances(sigma, (int(m.shape[-2]), int(m.shape[-1])), probs.dtype))

    def export_shard(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's per-sample spectra and resolutions (torchrun: :mod:`condcli.analysis.gather`)."""
        return list(zip(self.sigma, self.tol, strict=True))

    def absorb_shards(self, parts: Sequence[list[tuple[torch.Tensor, torch.Tensor]]], order: Order) -> None:
        """Every rank's :meth:`export_shard`, in sample order."""
        rows = order.rows(parts, f"layer {self.spec.index} P spectra")
        self.sigma, self.tol = [s for s, _ in rows], [t for _, t in rows]

    def result(self, index: int | None) -> RankLayer:
        n = self.n
        m = default_index(n) if index is None else index
        curves = [cumulative_spectrum(s) for s in self.sigma]  # per sample (G, H, r)
        padded = [torch.nn.functional.pad(c, (0, n - c.shape[-1]), value=1.0) for c in curves]
        at_m = [c[..., m - 1] for c in padded]  # (G, H): c = 1 past a shorter sample's n
        rank90 = [rank_at_fraction(c, THRESHOLD) for c in curves]
        erank = [effective_rank_of_spectrum(s) for s in self.sigma]
        table = torch.cat([c.reshape(-1, n) for c in padded]).numpy()
        sig = np.full((table.shape[0], n), np.nan)
        row = 0
        for s in self.sigma:
            flat = s.reshape(-1, s.shape[-1]).numpy()
            sig[row : row + flat.shape[0], : flat.shape[1]] = flat
            row += flat.shape[0]
        heads = int(self.sigma[0].shape[1])
        heads_at_m = tuple(
            float(np.median(np.concatenate([a[:, h].numpy() for a in at_m]))) for h in range(heads)
        )
        detail = None
        if self.per_head:
            detail = tuple(
                RankHead(
                    head=h,
                    cumulative_median=tuple(
                        np.median(torch.cat([c[:, h] for c in padded]).numpy(), axis=0).tolist()
                    ),
                    at_m=_matrix_aggregate([a[:, h] for a in at_m]),
                    rank90=_matrix_aggregate([r[:, h] for r in rank90]),
                    erank=_matrix_aggregate([e[:, h] for e in erank]),
                )
                for h in range(heads)
            )
        return RankLayer(
            index=self.spec.index,
            name=self.spec.name,
            attention=self.spec.attention,
            approximation=self.spec.approximation,
            heads=heads,
            n=n,
            index_m=m,
            samples=len(self.sigma),
            cumulative=_band(table, np.full(n, table.shape[0])),
            sigma=resolved_band(sig, float(max(float(t.max()) for t in self.tol))),
            at_m=_matrix_aggregate(at_m),
            heads_at_m=heads_at_m,
            rank90=_matrix_aggregate(rank90),
            erank=_matrix_aggregate(erank),
            heads_detail=detail,
        )


def rank_result(layers: dict[int, RankAccumulator], index: int | None) -> RankDecayResult:
    """Every chosen layer's :class:`RankLayer`, and which m they were read at."""
    check_index_fits(index, layers)
    results = tuple(acc.result(index) for acc in layers.values())
    ms = {layer.index_m for layer in results}
    common = next(iter(ms)) if len(ms) == 1 else None
    rule = f"index = {index}" if index is not None else "round(n/4) per layer"
    return RankDecayResult(index_m=common, index_rule=rule, threshold=THRESHOLD, layers=results)
