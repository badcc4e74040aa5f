"""X over a stream of batches (docs/math.md#spectra): κ(X), κ(X + λI_k), κ(X + C), σ, numerical rank,
spectra."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from condcli.adapters.base import Adapter
from condcli.analysis.persample import distinct_rows, distinct_summaries, summarize_samples
from condcli.errors import InternalError
from condcli.reports.envelope import EMBEDDING_KEYS, EmbeddingReport
from condcli.reports.metrics import EMBEDDING
from condcli.reports.refusal import Refused
from condcli.spectra import ScalarStream, SpectrumStream, corrected_kappa_from_sigma, shift, weyl_bound
from condcli.spectra.aggregate import ShardOrder, check_fields
from condcli.spectra.core import precision_tolerance


def _tolerances(
    sigma: Sequence[torch.Tensor], mats: Sequence[torch.Tensor], resolution: torch.dtype
) -> torch.Tensor:
    """Each sample's tol = u·‖X‖_F at ``resolution`` (docs/math.md#spectra), from its float64 spectrum."""
    return torch.stack(
        [
            precision_tolerance(v.cpu(), (int(m.shape[-2]), int(m.shape[-1])), resolution)
            for v, m in zip(sigma, mats, strict=True)
        ]
    )


class EmbeddingAccumulator:
    """Feed it each batch's per-sample X (padding removed); :meth:`result` gives the report section.

    One stream per key of the section (:data:`condcli.reports.envelope.EMBEDDING_KEYS`: the registry's
    embedding metrics and the statistics beside them), merged across processes like every accumulator."""

    def __init__(self, lam: float, *, spectra: bool = True) -> None:
        self.lam = lam
        self.keep_spectra = spectra
        # a metric with a flag keeps per-sample floor marks: σ_1/tol where X is below the capture's resolution
        flagged = {m.key for m in EMBEDDING if m.flag is not None}
        self.streams = {
            key: ScalarStream(floors=key in flagged, ceilings=key == "sigma_min") for key in EMBEDDING_KEYS
        }
        self.spectrum, self.spectrum_conditioned = SpectrumStream(), SpectrumStream()
        self.below: list[int] = []  # samples whose X is below resolution
        self.repeated: list[int] = []  # samples whose X has fewer distinct rows than k: κ(X) = inf exactly
        self.seen = 0
        self.k = 0
        self.tokens = 0  # N of the longest sample
        self.dim = 0  # d
        self.capture_dtype = ""
        self.exact_lookup = True  # every batch's X was its stored token embeddings (capture.exact_lookup)

    def add(self, mats: Sequence[torch.Tensor], *, exact_lookup: bool = False) -> None:
        """One batch of X matrices (N_b, d), in the model's dtype. ``exact_lookup``: X is the model's stored
        token embeddings gathered by the ids, so storing it added no rounding: flagged against float64."""
        grouped = [tuple(m.shape) for m in mats if m.ndim != 2]
        if grouped:  # X is N × d per sample; a stack of groups is no X (CSATv2's first block reads groups)
            raise Refused(
                "qkv-unreadable",
                f"X, the first attention block's input, came as {grouped[0]} per sample, not tokens × width:"
                f" a {len(grouped[0])}-axis map (a convolutional feature map, or tokens regrouped or pooled"
                " before q/k/v) reaches the attention, so X cannot be placed as (N, d) here",
                "describe the model's embedding and blocks in a TOML file passed as `adapter` "
                "(docs/guides/your-own-model.md)",
            )
        dtype = mats[0].dtype
        self.capture_dtype = str(dtype).removeprefix("torch.")
        self.exact_lookup = self.exact_lookup and exact_lookup
        resolution = torch.float64 if exact_lookup else dtype
        s = summarize_samples(mats, resolution, repeats=True)
        assert s.distinct is not None and s.repeated is not None
        distinct = distinct_summaries(mats, resolution, s)
        shifted_mats = [shift(m, self.lam) for m in mats]
        shifted = summarize_samples(shifted_mats, resolution)
        sigma_max = torch.stack([v[0] for v in s.sigma]).cpu()
        tol = _tolerances(s.sigma, mats, resolution)
        k = torch.tensor([min(m.shape[-2:]) for m in mats])
        zero = s.distinct < k  # repeated rows force σ_k (and all past the distinct rows) to exactly 0
        sigma_k = torch.stack([v[-1] for v in s.sigma]).cpu()
        ceiling = s.below  # below resolution (not repeated rows): σ_min < tol is all the capture tells
        put = self.streams
        put["kappa"].extend(s.reported, s.below, s.uncertainty)
        put["kappa_distinct"].extend(distinct.reported, distinct.below, distinct.uncertainty)
        put["distinct_rows"].extend(s.distinct)
        put["rows"].extend([int(m.shape[0]) for m in mats])
        put["kappa_conditioned"].extend(shifted.kappa)
        put["kappa_corrected"].extend(torch.stack([corrected_kappa_from_sigma(v) for v in s.sigma]).cpu())
        put["sigma_max"].extend(sigma_max)
        sigma_min = torch.where(zero, torch.zeros_like(sigma_k), torch.where(ceiling, tol, sigma_k))
        put["sigma_min"].extend(sigma_min, ceilings=ceiling, zeros=zero)
        put["numerical_rank"].extend(s.rank)
        put["weyl_bound"].extend(weyl_bound(sigma_max, self.lam))
        if self.keep_spectra:
            self.spectrum.extend([v.cpu() for v in s.sigma], tol.tolist(), s.distinct.tolist())
            self.spectrum_conditioned.extend(
                [v.cpu() for v in shifted.sigma],
                _tolerances(shifted.sigma, shifted_mats, resolution).tolist(),
                [int(distinct_rows(m)) for m in shifted_mats],
            )
        self.below.extend(self.seen + i for i in torch.nonzero(s.below).flatten().tolist())
        self.repeated.extend(self.seen + i for i in torch.nonzero(s.repeated).flatten().tolist())
        self.seen += len(mats)
        self.k = max(self.k, *(int(v.shape[-1]) for v in s.sigma))
        self.tokens = max(self.tokens, *(int(m.shape[0]) for m in mats))
        self.dim = int(mats[0].shape[-1])

    # every field, and how :meth:`absorb_shards` merges it: a field added without a rule here fails loudly
    SPECTRA = ("spectrum", "spectrum_conditioned")
    SETTINGS = ("lam", "keep_spectra")
    _SCALARS = ("seen", "k", "tokens", "dim", "capture_dtype", "exact_lookup")
    _POSITIONS = ("below", "repeated")

    def export_shard(self) -> dict[str, Any]:
        """This process's per-sample state, picklable (torchrun: :mod:`condcli.analysis.gather`)."""
        check_fields(self, {"streams", *self.SPECTRA, *self.SETTINGS, *self._POSITIONS, *self._SCALARS})
        return {
            "streams": {key: stream.export_shard() for key, stream in self.streams.items()},
            **{name: getattr(self, name).export_shard() for name in self.SPECTRA},
            **{name: list(getattr(self, name)) for name in self._POSITIONS},
            **{name: getattr(self, name) for name in self._SCALARS},
        }

    def absorb_shards(self, parts: Sequence[dict[str, Any]], order: ShardOrder) -> None:
        """Every process's :meth:`export_shard`, in sample order."""
        for key, stream in self.streams.items():
            stream.absorb_shards([p["streams"][key] for p in parts], order, f"embedding {key}")
        for name in self.SPECTRA:
            getattr(self, name).absorb_shards([p[name] for p in parts], order, f"embedding {name}")
        for name in self._POSITIONS:
            setattr(self, name, order.positions([p[name] for p in parts]))
        self.seen = sum(p["seen"] for p in parts)
        self.k = max(p["k"] for p in parts)
        self.tokens = max(p["tokens"] for p in parts)
        self.dim = max(p["dim"] for p in parts)
        self.capture_dtype = next((p["capture_dtype"] for p in parts if p["capture_dtype"]), "")
        self.exact_lookup = all(p["exact_lookup"] for p in parts)

    def _zeros_reason(self) -> str | None:
        """What forces the spectrum's exact zeros: the first repeated sample's distinct rows."""
        if not self.repeated:
            return None
        i = self.repeated[0]
        rows = self.streams["rows"].result().per_sample
        r, n = int(self.streams["distinct_rows"].result().per_sample[i]), int(rows[i])
        return f"{r} distinct of {n} rows: repeated tokens"

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
            values={key: stream.result() for key, stream in self.streams.items()},
            below_precision_samples=tuple(self.below),
            repeated_rows_samples=tuple(self.repeated),
            spectrum=self.spectrum.result(self._zeros_reason()) if self.keep_spectra else None,
            spectrum_conditioned=self.spectrum_conditioned.result() if self.keep_spectra else None,
        )
