"""Samples across processes: ``torchrun --nproc_per_node N -m condcli COMMAND …`` (docs/math.md#cli).

torchrun starts N copies of the command with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` set. Every copy reads the whole input stream (so the count, the files skipped and the lines
truncated are the same everywhere) and analyses the batches ``rank, rank + N, …`` of it: the batches a
single process would form, so the model sees exactly the same batches and the report is bitwise one
process's (a forward is not bitwise batch-invariant). The per-sample results are exchanged once and put back
in sample order on every rank (:mod:`condcli.analysis.gather`); each rank then builds the same report, and
rank 0 alone prints and writes.

Every exchange carries a tag, so a rank that failed (an error before or during its shard) still takes part:
it sends ``("exit", (code, line))`` where the others send their results, they raise :class:`PeerFailed`
with its line, and all ranks end in :func:`conclude`, which repeats the exchange until every rank is there
and hands each the same exit code (rank 0's, else the first failing rank's). A rank that dies outright is
seen by torchrun, which stops the others; a peer that vanishes mid-exchange, or one that does not arrive
within ``CONDCLI_DIST_TIMEOUT`` seconds (default 1800), is one error on every rank that is left.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from condcli.errors import CondcliError, UsageError

TIMEOUT_ENV = "CONDCLI_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 1800.0  # ranks wait for the slowest one's shard at the exchange


@dataclass(frozen=True)
class World:
    """This process's place among torchrun's: rank ``rank`` of ``size``, GPU ``local_rank`` of its node."""

    rank: int
    size: int
    local_rank: int


class PeerFailed(CondcliError):
    """Another rank of the run failed: its error line and exit code, raised on the ranks that did not."""

    def __init__(self, line: str, code: int) -> None:
        self.code = code
        super().__init__(line)

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return self.code


class ExchangeError(CondcliError):
    """The process group broke: a peer vanished, or did not arrive in time."""

    exit_code = 2


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not an integer", "run the command through torchrun") from None


def world() -> World | None:
    """The torchrun world, or None for a single process (no ``WORLD_SIZE``, or ``WORLD_SIZE=1``)."""
    size = _env_int("WORLD_SIZE")
    if size is None or size <= 1:
        return None
    rank = _env_int("RANK")
    if rank is None or not 0 <= rank < size:
        raise UsageError(f"WORLD_SIZE={size} but RANK is {rank}", "start the processes with torchrun")
    return World(rank, size, _env_int("LOCAL_RANK") or 0)


def is_writer() -> bool:
    """Whether this process prints and writes: rank 0, or a single process."""
    w = world()
    return w is None or w.rank == 0


def timeout() -> timedelta:
    """How long a rank waits for the others at an exchange (``CONDCLI_DIST_TIMEOUT`` seconds)."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        seconds = float(text) if text else DEFAULT_TIMEOUT_S
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UsageError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds > 0", f"e.g. {TIMEOUT_ENV}=600")
    return timedelta(seconds=seconds)


def check_readable_by_all(text: Path | None) -> None:
    """Under torchrun every rank reads the whole ``text``: standard input or a pipe cannot be read by all."""
    w = world()
    if w is None or text is None:
        return
    try:
        once = str(text) == "-" or not stat.S_ISREG(text.stat().st_mode)
    except OSError:  # missing or unreadable: said when it is read
        return
    if once:
        shown = "standard input" if str(text) == "-" else f"{text} (not a regular file)"
        raise UsageError(
            f"`text={text}`: under torchrun each of the {w.size} processes reads the whole text, and "
            f"{shown} can be read only once",
            "save the text to a file and give `text=FILE`",
        )


_group: dict[str, bool] = {"ready": False, "broken": False, "left_as_peer": False}


def start() -> None:
    """Join the process group (all ranks meet, within the timeout)."""
    _init()


def _init() -> None:
    import torch
    import torch.distributed as dist

    if _group["ready"]:
        return
    # objects are exchanged over gloo (CPU); CUDA tensors, should any be exchanged, over nccl
    backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
    try:
        dist.init_process_group(backend=backend, init_method="env://", timeout=timeout())
    except (RuntimeError, ValueError) as e:
        raise ExchangeError(
            f"the torchrun processes could not meet ({type(e).__name__}: {_first_line(e)})",
            "start condcli under torchrun (one process per rank), or without torchrun's variables set",
        ) from None
    _group["ready"] = True


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def exchange(tag: str, payload: Any) -> list[tuple[str, Any]]:
    """Every rank's ``(tag, payload)``, in rank order (all_gather_object over gloo, with the timeout)."""
    import torch.distributed as dist

    w = world()
    if w is None:
        return [(tag, payload)]
    _init()
    got: list[Any] = [None] * w.size
    try:
        dist.all_gather_object(got, (tag, payload))
    except (RuntimeError, ValueError) as e:  # a peer died mid-exchange, or did not come in time
        _group["broken"] = True  # no more exchanges: the run ends on this rank with this error
        late = "timed out" in str(e).lower() or "timeout" in str(e).lower()
        why = (
            f"did not answer within {timeout().total_seconds():g} s" if late else "stopped (connection lost)"
        )
        raise ExchangeError(
            f"another process of this torchrun run {why} before the results were exchanged",
            "see that process's output (torchrun's summary names it); rerun"
            + (f", with a larger {TIMEOUT_ENV} if its shard is slower" if late else ""),
        ) from None
    return [(str(t), p) for t, p in got]


def results(tag: str, payload: Any) -> list[Any]:
    """The ``payload`` of every rank (rank order); :class:`PeerFailed` if a rank sent its failure instead."""
    got = exchange(tag, payload)
    for t, p in got:
        if t == "exit":
            code, line = p
            raise PeerFailed(line, code)
        if t != tag:
            raise ExchangeError(f"the ranks disagree on what they exchange ({t!r} vs {tag!r})", "rerun")
    return [p for _, p in got]


def conclude(code: int, line: str | None) -> tuple[int, str | None]:
    """The run's end on every rank: the exit code all ranks share (rank 0's, else the first nonzero) and
    the line rank 0 should still print (another rank's error that rank 0 did not print), then teardown.

    Single process: ``(code, None)``.
    """
    w = world()
    if w is None:
        return code, None
    if _group["broken"]:  # this rank already said why (ExchangeError): nobody left to agree with
        teardown()
        return code, None
    try:
        while True:
            got = exchange("exit", (code, line))
            if all(t == "exit" for t, _ in got):
                break
    finally:
        teardown()
    codes = [(int(p[0]), p[1]) for _, p in got]
    if codes[0][0]:
        return codes[0][0], None
    failed = next(((c, text) for c, text in codes if c), None)
    if failed is None:
        return 0, None
    return failed[0], failed[1]


def teardown() -> None:
    """Leave the process group (if one was made), in step: no rank destroys it before every rank is past
    its last exchange, no two ranks destroy theirs at once (the other ranks first), and rank 0 (whose
    process may host the rendezvous store) leaves last. A rank that left while a peer still read its last
    message, or while the peer destroyed its own group, aborted that peer (SIGABRT) now and then."""
    import torch.distributed as dist

    if _group["ready"] and dist.is_initialized() and not _group["broken"]:
        store = _store()
        w = world()
        first = w is None or w.rank != 0
        _meet(store, "condcli/finished", everyone=True)
        if first:
            dist.destroy_process_group()
        _meet(store, "condcli/left", everyone=False)  # rank 0 waits here until the others have left
        if not first:
            dist.destroy_process_group()
        _group["left_as_peer"] = first
    _group["ready"] = False


def left_as_peer() -> bool:
    """Whether this process left a process group as a rank other than 0. Such a process should end at once
    (:func:`condcli.cli.main.finish`): rank 0 leaves as soon as the others have, and takes the rendezvous
    store it may host with it; a peer still in the interpreter's shutdown then, with torch's C++ objects
    being torn down, was seen to abort now and then (SIGABRT, exit −6: three times in full suites)."""
    return _group["left_as_peer"]


def _store() -> Any:
    """The process group's key-value store (kept alive here past the group), or None."""
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except Exception:  # no store: leave without the handshake
        return None


def _meet(store: Any, key: str, *, everyone: bool, wait_s: float = 60.0) -> None:
    """Count this rank in at ``key``; wait until every rank has (``everyone``), or only on rank 0."""
    w = world()
    if store is None or w is None:
        return
    try:
        store.add(key, 1)
        if not everyone and w.rank != 0:
            return
        deadline = time.monotonic() + wait_s
        while store.add(key, 0) < w.size and time.monotonic() < deadline:
            time.sleep(0.01)
    except Exception:  # a rank or the store gone: nothing left to wait for
        return
