"""The one batch loop every runner uses: per batch the plain forward (X and each chosen layer handed to the
runner), then each conditioned forward, then the freed memory is handed back and progress moves on.

A runner declares what it keeps (a :data:`Take` per forward that puts each captured layer into its
accumulators) and what it does with X; the loop, the order of the forwards, the padding cut and the memory
discipline live here once.

Under torchrun (:mod:`condcli.distributed`) each rank analyses every N-th batch of the stream (the batches
one process forms: the model sees the same batches, so the report is bitwise one process's), then the
accumulators a runner names in ``shared`` are exchanged and put back in sample order on every rank
(:mod:`condcli.analysis.gather`).

A run whose generic readings are still to be proven (:func:`condcli.analysis.proof.pending`) has them proven
here, on the stream's first batch: in the plain forward that captures it, where that forward runs eager
attention in one process; else in a forward of its own first. :func:`drive` returns the model proven.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import torch

from condcli.analysis.common import Progress, conditioned_overflow, release_memory
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.gather import Order, absorb, export
from condcli.analysis.persample import trim
from condcli.analysis.proof import InForward, pending_for
from condcli.capture import PROBES, LayerCapture, LayerSink, capture, exact_lookup, runs_eager
from condcli.conditioning import Conditioning
from condcli.distributed import results, world
from condcli.errors import NonFiniteInputError, stop_if_signalled
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadedModel

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
    shared: Sequence[object] = (),
) -> LoadedModel:
    """Stream every batch through the model: the plain forward (its X into ``embedding``, then ``on_x``;
    each of ``layers`` to ``plain``), then each of ``conditioned`` in order, capturing ``probes``.

    Memory stays flat in the number of samples: nothing of a batch outlives it but what the sinks keep.
    ``shared``: what ``plain``, ``conditioned`` and ``on_x`` accumulate into (accumulators, dicts of them,
    lists of per-sample values), gathered with ``embedding`` across torchrun's ranks.

    Returns ``loaded`` with its generic readings proven where they were pending (raising
    :class:`~condcli.analysis.proof.Reread` where the proof changed one of ``layers``).
    """
    w = world()
    proof = pending_for(loaded)
    mine: list[int] = []  # the stream indices of the samples this rank analysed
    start = 0
    for number, batch in enumerate(inputs):
        stop_if_signalled()  # a Ctrl-C that a finaliser swallowed still stops the run
        first, start = start, start + batch.size
        watched = None
        if proof is not None and number == 0:  # every rank proves on the stream's first batch
            if w is None and proof.chosen <= set(layers) and runs_eager(loaded.adapter, layers, probes):
                watched = proof
            else:
                loaded = proof.settle(batch)
        if w is not None and number % w.size != w.rank:
            if progress is not None:
                progress(batch.size)
            continue
        mine.extend(range(first, start))
        loaded = _one(loaded, batch, embedding, layers, plain, conditioned, probes, on_x, watched)
        if progress is not None:
            progress(batch.size)
    if w is not None:
        state = [embedding, *shared]
        parts = results("state", (mine, [export(s) for s in state]))
        order = Order([p[0] for p in parts])
        for j, s in enumerate(state):
            absorb(s, [p[1][j] for p in parts], order)
    return loaded


def _one(
    loaded: LoadedModel,
    batch: Batch,
    embedding: EmbeddingAccumulator,
    layers: Sequence[int],
    plain: Take,
    conditioned: Sequence[Conditioned],
    probes: Collection[str],
    on_x: OnX | None,
    proof: InForward | None = None,
) -> LoadedModel:
    """One batch: the plain forward (watched by ``proof``, then settled), then each conditioned one; its
    memory handed back. Returns ``loaded``, proven where ``proof`` was given."""
    adapter = loaded.adapter
    lengths = batch.lengths
    got = capture(adapter, batch, layers=layers, probes=probes, sink=_bound(plain, lengths), proving=proof)
    if proof is not None:
        loaded = proof.settle(batch)
        adapter = loaded.adapter
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
    return loaded


def _bound(take: Take, lengths: torch.Tensor | None) -> LayerSink:
    def sink(layer: LayerCapture) -> None:
        take(layer, lengths)

    return sink
