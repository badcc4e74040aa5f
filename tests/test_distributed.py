"""The torchrun environment read by :mod:`condcli.distributed`: who this process is, how long it waits, and
what it refuses to read (standard input, a pipe: every rank reads the whole input)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from condcli import distributed
from condcli.distributed import World
from condcli.errors import UsageError


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", distributed.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_one_process_without_torchrun_or_with_a_world_of_one(env: pytest.MonkeyPatch) -> None:
    assert distributed.world() is None and distributed.is_writer()
    env.setenv("WORLD_SIZE", "1")
    env.setenv("RANK", "0")
    assert distributed.world() is None
    assert distributed.conclude(2, None) == (2, None)  # a single process keeps its own code


def test_torchrun_rank_and_world_are_read_from_the_environment(env: pytest.MonkeyPatch) -> None:
    env.setenv("WORLD_SIZE", "4")
    env.setenv("RANK", "3")
    env.setenv("LOCAL_RANK", "1")
    assert distributed.world() == World(3, 4, 1)
    assert not distributed.is_writer()
    env.setenv("RANK", "0")
    assert distributed.is_writer()


@pytest.mark.parametrize("rank", ["4", "-1", "x", ""])
def test_a_rank_outside_the_world_is_one_usage_error(env: pytest.MonkeyPatch, rank: str) -> None:
    env.setenv("WORLD_SIZE", "4")
    env.setenv("RANK", rank)
    with pytest.raises(UsageError, match=r"RANK|torchrun"):
        distributed.world()


def test_timeout_default_given_and_refused(env: pytest.MonkeyPatch) -> None:
    assert distributed.timeout() == timedelta(seconds=distributed.DEFAULT_TIMEOUT_S)
    env.setenv(distributed.TIMEOUT_ENV, "12.5")
    assert distributed.timeout() == timedelta(seconds=12.5)
    for bad in ("0", "-3", "soon", "nan"):
        env.setenv(distributed.TIMEOUT_ENV, bad)
        with pytest.raises(UsageError, match=distributed.TIMEOUT_ENV):
            distributed.timeout()


def test_standard_input_and_pipes_are_refused_under_torchrun_only(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fifo = tmp_path / "lines"
    os.mkfifo(fifo)
    text = tmp_path / "lines.txt"
    text.write_text("a\n")
    for path in (Path("-"), fifo, text, tmp_path / "missing.txt"):
        distributed.check_readable_by_all(path)  # one process: read as usual
    env.setenv("WORLD_SIZE", "2")
    env.setenv("RANK", "1")
    for path, said in ((Path("-"), "standard input"), (fifo, r"\(not a regular file\)")):
        with pytest.raises(UsageError, match=f"{said} can be read only once") as e:
            distributed.check_readable_by_all(path)
        assert e.value.hint == "save the text to a file and give `text=FILE`"
    distributed.check_readable_by_all(text)
    distributed.check_readable_by_all(tmp_path / "missing.txt")  # said where it is read


PEER_END = """
import sys, threading, weakref
from pathlib import Path
from condcli import distributed
from condcli.cli.main import finish

class Folder:
    pass

kept = Folder()
weakref.finalize(kept, Path(sys.argv[1]).write_text, "finalized")  # as big_model's offload folders
if sys.argv[2] == "peer":
    distributed._group["left_as_peer"] = True
    threading.Thread(target=threading.Event().wait, daemon=False).start()  # shutdown would join it forever
print("said", end="")
finish(7)
"""


@pytest.mark.parametrize("role", ["peer", "alone"])
def test_a_rank_that_left_as_peer_ends_at_once_after_the_exit_handlers(tmp_path: Path, role: str) -> None:
    """A torchrun rank other than 0 ends with os._exit once its group is left (no interpreter shutdown, where
    a peer was seen to abort as rank 0 went away); stdout is flushed, the exit handlers (temporary folders'
    finalizers) still run, and the exit code is the run's."""
    import subprocess
    import sys

    mark = tmp_path / "mark"
    got = subprocess.run(
        [sys.executable, "-c", PEER_END, str(mark), role], capture_output=True, text=True, timeout=60
    )
    assert (got.returncode, got.stdout, got.stderr) == (7, "said", "")
    assert mark.read_text() == "finalized"
