"""Per-sample results of every rank put back in sample order (``torchrun``: :mod:`condcli.distributed`).

Each rank analysed some batches of the stream into its own accumulators. :func:`export` takes the
per-sample values out of an accumulator (plain arrays and numbers: picklable, no model, no weights), the
ranks exchange them, and :func:`absorb` puts everyone's values into the local accumulator in the order a
single process would have added them: the report built from it is then bitwise one process's.

Every accumulator merges through one protocol: ``export_shard()`` and ``absorb_shards(parts, order)``
(the streams of :mod:`condcli.spectra.aggregate`, the embedding and per-layer accumulators, the sweep's and
rank decay's). Each lists the fields it merges: one that gains a field it does not know fails loudly
(:class:`InternalError`) instead of being silently left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from condcli.errors import InternalError
from condcli.spectra import ScalarStream


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


def export(obj: Any) -> Any:
    """The per-sample state of an accumulator (a dict of them, a list of per-sample values, or anything with
    ``export_shard``), picklable."""
    if isinstance(obj, dict):
        return {k: export(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_row(v) for v in obj]
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
        obj.absorb_shards(parts, order, what)
        return
    if hasattr(obj, "absorb_shards"):
        obj.absorb_shards(parts, order)
        return
    raise InternalError(f"{type(obj).__name__} cannot be gathered across processes", "report it")
