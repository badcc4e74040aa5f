"""X over a stream of batches (docs/math.md#spectra): κ(X), κ(X + λI_k), κ(X + C), σ, numerical rank,
spectra."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from condcli.adapters.base import Adapter
from condcli.analysis.persample import summarize_samples
from condcli.errors import InternalError
from condcli.reports.spectrum import EmbeddingReport
from condcli.spectra import ScalarStream, SpectrumStream, corrected_kappa_from_sigma, shift, weyl_bound
from condcli.spectra.aggregate import ShardOrder, check_fields


class EmbeddingAccumulator:
    """Feed it each batch's per-sample X (padding removed); :meth:`result` gives the report section."""

    def __init__(self, lam: float, *, spectra: bool = True) -> None:
        self.lam = lam
        self.keep_spectra = spectra
        self.kappa, self.kappa_conditioned, self.kappa_corrected = (
            ScalarStream(floors=True),  # κ(X): a floor σ_1/tol where X is below the capture's resolution
            ScalarStream(),
            ScalarStream(),
        )
        self.sigma_max, self.sigma_min, self.rank, self.weyl = (
            ScalarStream(),
            ScalarStream(),
            ScalarStream(),
            ScalarStream(),
        )
        self.spectrum, self.spectrum_conditioned = SpectrumStream(), SpectrumStream()
        self.below: list[int] = []
        self.seen = 0
        self.k = 0
        self.tokens = 0  # N of the longest sample
        self.dim = 0  # d
        self.capture_dtype = ""
        self.exact_lookup = True  # every batch's X was its stored token embeddings (capture.exact_lookup)

    def add(self, mats: Sequence[torch.Tensor], *, exact_lookup: bool = False) -> None:
        """One batch of X matrices (N_b, d), in the model's dtype. ``exact_lookup``: X is the model's stored
        token embeddings gathered by the ids, so storing it added no rounding: flagged against float64."""
        dtype = mats[0].dtype
        self.capture_dtype = str(dtype).removeprefix("torch.")
        self.exact_lookup = self.exact_lookup and exact_lookup
        resolution = torch.float64 if exact_lookup else dtype
        s = summarize_samples(mats, resolution)
        shifted = summarize_samples([shift(m, self.lam) for m in mats], resolution)
        sigma_max = torch.stack([v[0] for v in s.sigma]).cpu()
        self.kappa.extend(s.reported, s.below, s.uncertainty)
        self.kappa_conditioned.extend(shifted.kappa)
        self.kappa_corrected.extend(torch.stack([corrected_kappa_from_sigma(v) for v in s.sigma]).cpu())
        self.sigma_max.extend(sigma_max)
        self.sigma_min.extend(torch.stack([v[-1] for v in s.sigma]).cpu())
        self.rank.extend(s.rank)
        self.weyl.extend(weyl_bound(sigma_max, self.lam))
        if self.keep_spectra:
            self.spectrum.extend([v.cpu() for v in s.sigma])
            self.spectrum_conditioned.extend([v.cpu() for v in shifted.sigma])
        self.below.extend(self.seen + i for i in torch.nonzero(s.below).flatten().tolist())
        self.seen += len(mats)
        self.k = max(self.k, *(int(v.shape[-1]) for v in s.sigma))
        self.tokens = max(self.tokens, *(int(m.shape[0]) for m in mats))
        self.dim = int(mats[0].shape[-1])

    # every field, and how :meth:`absorb_shards` merges it: a field added without a rule here fails loudly
    STREAMS = ("kappa", "kappa_conditioned", "kappa_corrected", "sigma_max", "sigma_min", "rank", "weyl")
    SPECTRA = ("spectrum", "spectrum_conditioned")
    SETTINGS = ("lam", "keep_spectra")
    _SCALARS = ("seen", "k", "tokens", "dim", "capture_dtype", "exact_lookup")

    def export_shard(self) -> dict[str, Any]:
        """This process's per-sample state, picklable (torchrun: :mod:`condcli.analysis.gather`)."""
        check_fields(self, {*self.STREAMS, *self.SPECTRA, *self.SETTINGS, "below", *self._SCALARS})
        return {
            **{name: getattr(self, name).export_shard() for name in (*self.STREAMS, *self.SPECTRA)},
            "below": list(self.below),
            **{name: getattr(self, name) for name in self._SCALARS},
        }

    def absorb_shards(self, parts: Sequence[dict[str, Any]], order: ShardOrder) -> None:
        """Every process's :meth:`export_shard`, in sample order."""
        for name in (*self.STREAMS, *self.SPECTRA):
            getattr(self, name).absorb_shards([p[name] for p in parts], order, f"embedding {name}")
        self.below = order.positions([p["below"] for p in parts])
        self.seen = sum(p["seen"] for p in parts)
        self.k = max(p["k"] for p in parts)
        self.tokens = max(p["tokens"] for p in parts)
        self.dim = max(p["dim"] for p in parts)
        self.capture_dtype = next((p["capture_dtype"] for p in parts if p["capture_dtype"]), "")
        self.exact_lookup = all(p["exact_lookup"] for p in parts)

    def result(self, adapter: Adapter) -> EmbeddingReport:
        """The report section, labelled with where ``adapter`` takes X and the model's own conditioning."""
        point = adapter.embedding
        if not self.seen:
            raise InternalError("no embedding matrices were captured", "report it with the model name")
        return EmbeddingReport(
            where=point.name,
            description=point.description,
            after_position_encoding=point.after_position_encoding,
            model_conditioning=None if adapter.builtin is None else adapter.builtin.describe(),
            capture_dtype=self.capture_dtype,
            exact_lookup=self.exact_lookup,
            k=self.k,
            kappa=self.kappa.result(),
            kappa_conditioned=self.kappa_conditioned.result(),
            kappa_corrected=self.kappa_corrected.result(),
            sigma_max=self.sigma_max.result(),
            sigma_min=self.sigma_min.result(),
            numerical_rank=self.rank.result(),
            below_precision_samples=tuple(self.below),
            weyl_bound=self.weyl.result(),
            spectrum=self.spectrum.result() if self.keep_spectra else None,
            spectrum_conditioned=self.spectrum_conditioned.result() if self.keep_spectra else None,
        )
