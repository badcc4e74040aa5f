"""The one batch loop every runner uses: per batch the plain forward (X and each chosen layer handed to the
runner), then each conditioned forward, then the freed memory is handed back and progress moves on.

A runner declares what it keeps (a :data:`Take` per forward that puts each captured layer into its
accumulators) and what it does with X; the loop, the order of the forwards, the padding cut and the memory
discipline live here once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import torch

from condcli.analysis.common import Progress, conditioned_overflow, release_memory
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.persample import trim
from condcli.capture import PROBES, LayerCapture, LayerSink, capture, exact_lookup
from condcli.conditioning import Conditioning
from condcli.errors import NonFiniteInputError
from condcli.inputs import Batch
from condcli.sources import LoadedModel

# takes one captured layer and its batch's lengths (None: no padding) into the runner's accumulators
Take = Callable[[LayerCapture, torch.Tensor | None], None]
# X of the plain forward per sample (padding removed), and its batch
OnX = Callable[[list[torch.Tensor], Batch], None]


@dataclass(frozen=True)
class Conditioned:
    """One conditioned forward per batch: ``conditioning`` fed at X, each captured layer to ``take``."""

    conditioning: Conditioning
    take: Take


def drive(
    loaded: LoadedModel,
    inputs: Iterable[Batch],
    embedding: EmbeddingAccumulator,
    *,
    layers: Sequence[int],
    plain: Take,
    conditioned: Sequence[Conditioned] = (),
    probes: Collection[str] = PROBES,
    on_x: OnX | None = None,
    progress: Progress | None = None,
) -> None:
    """Stream every batch through the model: the plain forward (its X into ``embedding``, then ``on_x``;
    each of ``layers`` to ``plain``), then each of ``conditioned`` in order, capturing ``probes``.

    Memory stays flat in the number of samples: nothing of a batch outlives it but what the sinks keep.
    """
    adapter = loaded.adapter
    for batch in inputs:
        lengths = batch.lengths
        got = capture(adapter, batch, layers=layers, probes=probes, sink=_bound(plain, lengths))
        # checked once per batch, on the plain forward: X is the same before any conditioning
        exact = exact_lookup(adapter.model, got.x, batch.inputs)
        xs = trim(got.x, lengths, (0,))
        del got
        embedding.add(xs, exact_lookup=exact)
        if on_x is not None:
            on_x(xs, batch)
        del xs
        for forward in conditioned:
            try:
                capture(
                    adapter,
                    batch,
                    layers=layers,
                    probes=probes,
                    conditioning=forward.conditioning,
                    sink=_bound(forward.take, lengths),
                )
            except NonFiniteInputError as e:  # the plain forward of this batch was finite: λ overflowed
                raise conditioned_overflow(forward.conditioning, loaded.dtype) from e
        release_memory()
        if progress is not None:
            progress(batch.size)


def _bound(take: Take, lengths: torch.Tensor | None) -> LayerSink:
    def sink(layer: LayerCapture) -> None:
        take(layer, lengths)

    return sink
