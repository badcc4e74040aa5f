"""The token-embedding table E and an untied output head as reports: every σ, κ and whether the head is
tied (docs/math.md#embedding-table). Read by `spectrum` (its ``embedding_table``) and `weights`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

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

    @property
    def unresolved_from(self) -> int | None:
        """The list offset (0-based) of the first σ at or below :attr:`resolution`; None where all are above
        (docs/math.md#spectra-below-resolution)."""
        return next((i for i, v in enumerate(self.spectrum) if not v > self.resolution), None)

    @property
    def sigma_min_ceiling(self) -> bool:
        """Whether σ_k is below float64 resolution: the report gives the resolution, "σ_k < it"."""
        return not self.sigma_min > self.resolution

    def to_json(self) -> dict[str, Any]:
        """Every σ above the resolution as measured, null at or below it; σ_min the resolution where it is
        below (``sigma_min_ceiling``: the true σ_min is at most it)."""
        tail = self.unresolved_from
        shown = self.spectrum if tail is None else self.spectrum[:tail]
        return {
            "shape": list(self.shape),
            "kappa": json_float(self.kappa),
            "sigma_max": json_float(self.sigma_max),
            "sigma_min": json_float(self.resolution if self.sigma_min_ceiling else self.sigma_min),
            "spectrum": [json_float(v) for v in shown] + [None] * (len(self.spectrum) - len(shown)),
            "resolution": json_float(self.resolution),
            "unresolved_from": tail,
            "unresolved_count": len(self.spectrum) - len(shown),
            "sigma_min_ceiling": self.sigma_min_ceiling,
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
