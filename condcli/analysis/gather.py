"""Per-sample results of every rank put back in sample order (``torchrun``: :mod:`condcli.distributed`).

Each rank analysed some batches of the stream into its own accumulators. :func:`export` takes the
per-sample values out of an accumulator (plain arrays and numbers: picklable, no model, no weights), the
ranks exchange them, and :func:`absorb` puts everyone's values into the local accumulator in the order a
single process would have added them: the report built from it is then bitwise one process's.

An accumulator is mergeable when it is one of the kinds below, or has ``export_shard()`` and
``absorb_shards(parts, order)`` methods of its own. Each kind's fields are listed: one that gains a field
this module does not know fails loudly (:class:`InternalError`) instead of being silently left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.layers import ForwardAccumulator
from condcli.errors import InternalError
from condcli.spectra import ScalarStream, SpectrumStream


class Order:
    """Where each rank's samples go: ``indices[r]`` are the stream indices of rank r's samples, in the order
    it added them."""

    def __init__(self, indices: Sequence[Sequence[int]]) -> None:
        self.indices = [list(i) for i in indices]
        flat = [i for part in self.indices for i in part]
        self.count = len(flat)
        self.perm = np.argsort(np.asarray(flat, dtype=np.int64), kind="stable")
        if sorted(flat) != list(range(self.count)):
            raise InternalError("the ranks' samples are not one stream", "report it with the command line")

    def rows(self, parts: Sequence[Sequence[Any]], what: str) -> list[Any]:
        """Per-sample items of every rank (one per sample, or none at all) in stream order."""
        if all(len(p) == 0 for p in parts):
            return []
        for r, p in enumerate(parts):
            if len(p) != len(self.indices[r]):
                raise InternalError(
                    f"{what}: rank {r} holds {len(p)} values for {len(self.indices[r])} samples",
                    "report it with the command line",
                )
        flat = [x for p in parts for x in p]
        return [flat[int(i)] for i in self.perm]

    def positions(self, parts: Sequence[Sequence[int]]) -> list[int]:
        """Sample positions each rank counted locally (0 = its first sample), as stream indices, sorted."""
        return sorted(self.indices[r][j] for r, part in enumerate(parts) for j in part)


def _values(stream: ScalarStream) -> dict[str, list[Any] | None]:
    """Each per-sample list of the stream (its values, and floor marks where it keeps them): every field is
    a list of per-batch chunks (1-D arrays), or None where the stream does not keep that quantity."""
    out: dict[str, list[Any] | None] = {}
    for name, chunks in vars(stream).items():
        if chunks is not None and not isinstance(chunks, list):
            raise InternalError(f"ScalarStream.{name} cannot be gathered across processes", "report it")
        out[name] = None if chunks is None else [v for c in chunks for v in np.asarray(c).reshape(-1)]
    return out


def _stream(
    target: ScalarStream, parts: Sequence[dict[str, list[Any] | None]], order: Order, what: str
) -> None:
    for name in vars(target):
        got = [p[name] for p in parts]
        if any(g is None for g in got):
            setattr(target, name, None)
            continue
        rows = order.rows([g for g in got if g is not None], f"{what} {name}")
        setattr(target, name, [np.asarray(rows)] if rows else [])


def _streams(target: Sequence[ScalarStream], parts: Sequence[list[Any]], order: Order, what: str) -> None:
    for j, s in enumerate(target):
        _stream(s, [p[j] for p in parts], order, f"{what}[{j}]")


def _check_fields(obj: object, known: set[str]) -> None:
    extra = set(vars(obj)) - known
    if extra:
        raise InternalError(
            f"{type(obj).__name__} has fields {sorted(extra)} that condcli.analysis.gather does not merge",
            "run in one process (without torchrun), and report it",
        )


_EMBEDDING_STREAMS = (
    "kappa",
    "kappa_conditioned",
    "kappa_corrected",
    "sigma_max",
    "sigma_min",
    "rank",
    "weyl",
)
_EMBEDDING = {*_EMBEDDING_STREAMS, "spectrum", "spectrum_conditioned", "lam", "keep_spectra", "below"}
_EMBEDDING |= {"seen", "k", "tokens", "dim", "capture_dtype", "exact_lookup"}
_HEADS = ("head_mu_la", "head_la", "head_la_unrotated", "head_mu_a", "head_p", "head_mixing", "head_entropy")
_FORWARD = {"spec", "weights", "per_head", "kq", "kk", "kv", "streams", "below", *_HEADS}


def export(obj: Any) -> Any:
    """The per-sample state of an accumulator (a dict of them, a :class:`ScalarStream`, or a list of
    per-sample values), picklable."""
    if isinstance(obj, dict):
        return {k: export(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_row(v) for v in obj]
    if isinstance(obj, ScalarStream):
        return _values(obj)
    if isinstance(obj, EmbeddingAccumulator):
        _check_fields(obj, _EMBEDDING)
        return {
            **{name: _values(getattr(obj, name)) for name in _EMBEDDING_STREAMS},
            "spectrum": list(obj.spectrum._rows),
            "spectrum_conditioned": list(obj.spectrum_conditioned._rows),
            "below": list(obj.below),
            "seen": obj.seen,
            "k": obj.k,
            "tokens": obj.tokens,
            "dim": obj.dim,
            "capture_dtype": obj.capture_dtype,
            "exact_lookup": obj.exact_lookup,
        }
    if isinstance(obj, ForwardAccumulator):
        _check_fields(obj, _FORWARD)
        return {
            "streams": {k: _values(s) for k, s in obj.streams.items()},
            "below": dict(obj.below),
            **{name: [_values(s) for s in getattr(obj, name)] for name in _HEADS},
        }
    if hasattr(obj, "export_shard"):
        return obj.export_shard()
    raise InternalError(f"{type(obj).__name__} cannot be gathered across processes", "report it")


def _row(v: Any) -> Any:
    return v.detach().cpu() if isinstance(v, torch.Tensor) else v


def absorb(obj: Any, parts: Sequence[Any], order: Order, what: str = "state") -> None:
    """Put every rank's :func:`export` of ``obj`` (rank order) into ``obj``, in stream order."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            absorb(v, [p[k] for p in parts], order, f"{what}[{k}]")
        return
    if isinstance(obj, list):
        obj[:] = order.rows(parts, what)
        return
    if isinstance(obj, ScalarStream):
        _stream(obj, parts, order, what)
        return
    if isinstance(obj, EmbeddingAccumulator):
        for name in _EMBEDDING_STREAMS:
            _stream(getattr(obj, name), [p[name] for p in parts], order, f"embedding {name}")
        for name in ("spectrum", "spectrum_conditioned"):
            band: SpectrumStream = getattr(obj, name)
            band._rows = order.rows([p[name] for p in parts], f"embedding {name}")
        obj.below = order.positions([p["below"] for p in parts])
        obj.seen = sum(p["seen"] for p in parts)
        obj.k = max(p["k"] for p in parts)
        obj.tokens = max(p["tokens"] for p in parts)
        obj.dim = max(p["dim"] for p in parts)
        obj.capture_dtype = next((p["capture_dtype"] for p in parts if p["capture_dtype"]), "")
        obj.exact_lookup = all(p["exact_lookup"] for p in parts)
        return
    if isinstance(obj, ForwardAccumulator):
        name = f"layer {obj.spec.index}"
        for key, s in obj.streams.items():
            _stream(s, [p["streams"][key] for p in parts], order, f"{name} {key}")
        for head in _HEADS:
            _streams(getattr(obj, head), [p[head] for p in parts], order, f"{name} {head}")
        obj.below = {k: sum(p["below"][k] for p in parts) for k in obj.below}
        return
    if hasattr(obj, "absorb_shards"):
        obj.absorb_shards(parts, order)
        return
    raise InternalError(f"{type(obj).__name__} cannot be gathered across processes", "report it")
