"""Work that needs no forward pass, done beside it: ``condcli spectrum``'s model constants (κ of every layer's
whole projections and κ(E), a few seconds of float64 SVDs and Gram sums) run on a thread of their own while
the forward and the per-layer analysis run, filling the cores those leave idle (Python between kernels,
hooks, the waits of a layer's last decomposition). The thread starts once the first batch is in hand
(:meth:`Meanwhile.started`), so none of ours runs through a DataLoader's fork. Measured in
docs/performance.md#the-model-constants-beside-the-forward.

Only where the whole model sits on the CPU and torch has at least 2 threads: a model on a GPU, or dispatched
over devices (offloaded modules are loaded back for the while, :func:`condcli.analysis.spectrum`'s
``_embedding_table``), runs the work in order after the forward, as before. Either way the numbers are
bitwise the same: each decomposition is its own call on one MKL thread (:func:`condcli.spectra.strategies.
in_order`). An error of the work (NaN in the embedding table) is raised where its result is asked for, after
the forward, as it was when the work ran then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

import torch
from torch import nn

from condcli.spectra.strategies import in_order

T = TypeVar("T")
B = TypeVar("B")
_after: list[bool] = []  # :func:`after_the_forward` in force


class Meanwhile(Generic[T]):
    """``work()`` on a thread of its own from :meth:`start` (``beside``), else when :meth:`result` is first
    asked."""

    def __init__(self, work: Callable[[], T], *, beside: bool) -> None:
        self._work: Callable[[], T] | None = work
        self._value: T | None = None
        self._error: BaseException | None = None
        self._beside_ok = beside
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the work on its thread where it runs beside (once; after :meth:`result`, nothing)."""
        if self._beside_ok and self._thread is None and self._work is not None:
            # a daemon: an interrupted run (Ctrl-C during the forward) exits without waiting for it
            self._thread = threading.Thread(target=self._beside, name="condcli-meanwhile", daemon=True)
            self._thread.start()

    def started(self, batches: Iterable[B]) -> Iterator[B]:
        """``batches``, with the work started once the first is in hand: a user's DataLoader has forked its
        workers by then, so no thread of ours runs through a fork (a lock it held would stay held in the
        child)."""
        for batch in batches:
            self.start()
            yield batch

    def _beside(self) -> None:
        # grad mode is per thread (a new one records graphs); one core: beside the pool, not in it
        with torch.no_grad(), in_order():
            self._run()

    def _run(self) -> None:
        work, self._work = self._work, None
        assert work is not None
        try:
            self._value = work()
        except BaseException as e:  # handed to the caller of result(), in its thread
            self._error = e

    def result(self) -> T:
        """The work's result (waiting for it where it runs beside); its error, raised here."""
        if self._thread is not None:
            self._thread.join()
        elif self._work is not None:
            self._run()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def discard(self) -> None:
        """The work dropped: waited for where it already runs (no thread of a run outlives it, nor competes
        with the run started again in its place), never started otherwise."""
        self._work = None
        if self._thread is not None:
            self._thread.join()
        self._value, self._error = None, None


def meanwhile(work: Callable[[], T], model: nn.Module) -> Meanwhile[T]:
    """``work`` beside the forward of ``model`` where that pays (see the module), from :meth:`Meanwhile.start`
    on, else after it."""
    return Meanwhile(work, beside=beside_pays(model))


@contextmanager
def after_the_forward() -> Iterator[None]:
    """Every :func:`meanwhile` inside runs its work after the forward, as where it does not pay: the other
    side of the bench's comparison (bench/long_mix.py), and of the tests'."""
    _after.append(True)
    try:
        yield
    finally:
        _after.pop()


def beside_pays(model: nn.Module) -> bool:
    """Whether work beside ``model``'s forward fills idle cores: every parameter and buffer on the CPU (none
    offloaded: meta) and at least 2 torch threads (and no :func:`after_the_forward` in force)."""
    if _after or torch.get_num_threads() < 2:
        return False
    tensors = [*model.parameters(), *model.buffers()]
    return all(t.device.type == "cpu" for t in tensors)
