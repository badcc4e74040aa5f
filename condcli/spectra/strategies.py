"""How the many small decompositions run (κ of thousands of 197×197 matrices): one declaration per strategy,
a default per device kind.

A strategy maps a *batchable* op (a ``torch.linalg`` call that takes one matrix or a stack, e.g. ``svdvals``
or eigvalsh of a Gram matrix) over a flat stack (M, N, d) cut into *groups*: the matrices of one sample
(its heads, groups, layers), never matrices of two samples together. Whatever a batched kernel does with its
batch, a sample's results then depend on that sample alone, so they are bitwise identical whatever the sample
batch size (docs/math.md#aggregation). Strategies that decompose one matrix per call ignore the groups.

- ``loop``: one call per matrix on the matrices' own device (PyTorch's own loop on CUDA, plus a Python call
  and, for ``svdvals``, a host sync per matrix).
- ``threads``: one call per matrix, spread over a thread pool of CPU cores (LAPACK on one small matrix keeps
  about one core busy). A CUDA stack is copied to the host once and the results back once.
- ``batched``: one call per group. On CPU PyTorch loops LAPACK inside (last digits differ from one-matrix
  calls, still the same whatever the sample batch size). On CUDA it is one cuSOLVER dispatch per sample.

Defaults (:data:`DEFAULTS`): ``threads`` on the CPU, each decomposition on one MKL thread; ``batched`` on
CUDA, which is never worse than ``loop`` there (the same kernels, fewer host syncs and Python calls) and gets
cuSOLVER's batched kernels wherever PyTorch has them. The measurements and sources behind these defaults:
docs/performance.md#decomposition-strategies.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import torch

from condcli.errors import UsageError

Op = Callable[[torch.Tensor], torch.Tensor]  # one matrix (N, d) → (*out), or a stack (B, N, d) → (B, *out)


@dataclass(frozen=True)
class Strategy:
    """One way to run a batchable op over a flat stack of matrices."""

    name: str
    summary: str  # one line, shown by the bench
    run: Callable[[Op, torch.Tensor, Sequence[slice]], torch.Tensor]  # (op, (M, N, d), groups) → (M, *out)


_POOL: dict[int, ThreadPoolExecutor] = {}
T = TypeVar("T")
# a forked child inherits the pools but not their threads: mapping onto one would wait forever (a DataLoader
# worker or a sweep's child that runs condcli after its parent did), so the child starts with none
os.register_at_fork(after_in_child=_POOL.clear)
_worker = threading.local()


# the library torch links MKL into on Linux x86 wheels (where MKL's C API is exported)
TORCH_CPU_LIBRARY = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"


def _mkl_threads_setter() -> Callable[[int], int] | None:
    """MKL's ``MKL_Set_Num_Threads_Local`` from :data:`TORCH_CPU_LIBRARY`, or None (a build without MKL:
    OpenBLAS, Accelerate). It sets the calling thread's MKL thread count and returns the previous one (0: the
    global setting)."""
    try:
        fn = ctypes.CDLL(str(TORCH_CPU_LIBRARY)).MKL_Set_Num_Threads_Local  # C API (lowercase: Fortran)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return fn


_MKL_THREADS = _mkl_threads_setter()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """MKL on one thread in the calling thread only (torch's own threads keep theirs). A decomposition of a
    small matrix gains nothing from MKL's threads: measured here, a 197×197 SVD takes 3.3 ms with 2 MKL
    threads and 2.1 ms with 1, and a pool of 2 workers each running 2 MKL threads on 2 cores loses 15% to
    oversubscription. Every decomposition of :func:`thread_map` runs so, in a worker or not, so its results
    are bitwise the same whatever the pool does (MKL's threaded matmul differs in the last digits)."""
    if _MKL_THREADS is None:
        yield
        return
    previous = _MKL_THREADS(1)
    try:
        yield
    finally:
        _MKL_THREADS(previous)


@contextmanager
def in_order() -> Iterator[None]:
    """Every :func:`concurrently` (and :func:`thread_map`) of the calling thread runs its tasks in order in
    that thread, each on one MKL thread, as inside a pool worker: for a thread of its own that works beside
    the pool (:mod:`condcli.analysis.meanwhile`), so it takes one core and never queues behind the pool's
    tasks or they behind its. Its results are bitwise those of the pool."""
    was = getattr(_worker, "active", False)
    _worker.active = True
    try:
        yield
    finally:
        _worker.active = was


def thread_map(fn: Op, mats: list[torch.Tensor]) -> list[torch.Tensor]:
    """``fn`` on every (CPU) matrix, spread over torch's thread count; each matrix is its own call on one
    MKL thread (:func:`one_blas_thread`), so the results are bitwise those of a sequential loop. Runs
    sequentially inside a worker (no pool deadlock)."""
    return concurrently([partial(fn, m) for m in mats])


def concurrently(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Each of ``tasks`` on a pool of torch's thread count, each on one MKL thread (:func:`one_blas_thread`),
    their results in order; in order in the calling thread where there is one thread or one task, or inside
    a worker (no pool deadlock). A :func:`thread_map` inside a task runs its matrices one after the other
    on that worker, so the results are bitwise those of running the tasks one after the other: what this
    gains is a second task's work on a core the first leaves idle (one long prompt: one matrix a task)."""
    threads = torch.get_num_threads()
    if threads < 2 or len(tasks) < 2 or getattr(_worker, "active", False):
        with one_blas_thread():
            return [task() for task in tasks]
    pool = _POOL.get(threads)
    if pool is None:
        pool = _POOL[threads] = ThreadPoolExecutor(threads, thread_name_prefix="condcli-linalg")

    def run(task: Callable[[], T]) -> T:
        with in_order(), one_blas_thread():  # a task's own concurrently runs in order on this worker
            return task()

    return list(pool.map(run, tasks))


def _loop(op: Op, flat: torch.Tensor, groups: Sequence[slice]) -> torch.Tensor:
    return torch.stack([op(m) for m in flat.unbind(0)])


def _threads(op: Op, flat: torch.Tensor, groups: Sequence[slice]) -> torch.Tensor:
    host = flat.cpu()  # one copy for a CUDA stack (none on CPU)
    return torch.stack(thread_map(op, list(host.unbind(0)))).to(flat.device)


def _batched(op: Op, flat: torch.Tensor, groups: Sequence[slice]) -> torch.Tensor:
    return torch.cat([op(flat[g]) for g in groups])


LOOP = Strategy("loop", "one call per matrix on its device", _loop)
THREADS = Strategy("threads", "one call per matrix on a CPU thread pool (a GPU stack copied once)", _threads)
BATCHED = Strategy("batched", "one batched call per sample (its heads, groups and layers)", _batched)

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (LOOP, THREADS, BATCHED)}

# The strategy each device kind runs unless told otherwise. CUDA: to be confirmed by bench_gpu on a real GPU
# (the module docstring says why batched; bench_gpu compares all three on the device).
DEFAULTS: dict[str, str] = {"cpu": "threads", "cuda": "batched"}

_chosen: list[Strategy] = []  # innermost `using` last


def strategy_for(device: torch.device) -> Strategy:
    """The strategy in force for matrices on ``device``: the innermost :func:`using`, else the device kind's
    default (``loop`` for a kind with none)."""
    if _chosen:
        return _chosen[-1]
    return STRATEGIES[DEFAULTS.get(device.type, "loop")]


def lookup(name: str) -> Strategy:
    """The strategy called ``name``; :class:`UsageError` naming the choices otherwise."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UsageError(
            f"unknown linear-algebra strategy {name!r}", f"use one of {', '.join(STRATEGIES)}"
        ) from None


@contextmanager
def using(name: str) -> Iterator[Strategy]:
    """Run every decomposition inside with strategy ``name`` (benches and tests compare them this way)."""
    chosen = lookup(name)
    _chosen.append(chosen)
    try:
        yield chosen
    finally:
        _chosen.pop()


def sample_groups(lead: Sequence[int]) -> list[slice]:
    """Groups of a stack with leading shape ``lead``, flattened: one per index of the first leading dimension
    (the sample axis by condcli's convention), each holding that index's matrices. No leading dimension: one
    group."""
    if not lead:
        return [slice(0, 1)]
    per = 1
    for n in lead[1:]:
        per *= int(n)
    return [slice(i * per, (i + 1) * per) for i in range(int(lead[0]))]


def run_grouped(op: Op, x: torch.Tensor, groups: Sequence[slice] | None = None) -> torch.Tensor:
    """``op`` over every matrix of ``x`` (..., N, d) by the strategy in force on x's device; ``groups`` (over
    the flattened matrices) default to :func:`sample_groups`. Results reshaped to x's leading dims."""
    lead = tuple(x.shape[:-2])
    flat = x.reshape(-1, *x.shape[-2:])
    if flat.shape[0] == 0:
        out = op(flat)
    else:
        out = strategy_for(flat.device).run(op, flat, sample_groups(lead) if groups is None else groups)
    return out.reshape(lead + tuple(out.shape[1:]))
