"""The fuzz-style harness of tests/test_hostile.py: run condcli on one hostile input and check the promise.

A :class:`Hostile` case is a command line (``{tmp}`` stands for the case's own empty folder, which is also
the working directory), an optional ``setup`` that builds files there first, and what must come out:

- the exit code;
- on failure (exit ≠ 0): exactly one non-blank line on stderr, starting ``error:`` and containing ``says``
  (case-insensitive), never a traceback; on success: ``says`` somewhere on stderr (a note), no traceback;
- no file that existed before the run changed (content, type or mode: a FIFO stays a FIFO), and on failure
  no new file left behind;
- ``memory_gib``: the run happens in a child process under that address-space limit
  (``resource.setrlimit(RLIMIT_AS)``), so a regression that allocates without bound fails the test instead
  of taking the machine down. Cases that need a real process (signals, a closed stdout, stdin) set
  ``process=True``; the others run in-process through :func:`condcli.cli.main.main`, which is what the
  console script calls.
"""

from __future__ import annotations

import hashlib
import os
import re
import resource
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

GiB = 1 << 30
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Hostile:
    """One hostile or careless command line and what condcli must do with it."""

    id: str  # a short, unique pytest id
    argv: tuple[str, ...]  # after "condcli"; "{tmp}" is the case's folder (also the working directory)
    exit: int  # the exit code
    says: str  # a substring of the error line (or, on success, of stderr)
    setup: Callable[[Path], None] | None = None  # builds the case's files in its folder
    memory_gib: float | None = None  # run in a child process under this address-space limit
    process: bool = False  # run in a child process (signals, stdin, a closed stdout)
    stdin: bytes | None = None  # fed to the child's stdin (implies a child process)
    timeout_s: float = 300.0  # the child is killed after this long (a hang fails the case)
    watch: tuple[str, ...] = ()  # paths outside {tmp} that must be left as they were (e.g. /dev/null)


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def snapshot(paths: list[Path]) -> dict[str, tuple[int, str]]:
    """Every path under ``paths`` (symlinks not followed): its type and mode, and a hash of a file's bytes."""
    seen: dict[str, tuple[int, str]] = {}

    def one(p: Path) -> None:
        try:
            st = p.lstat()
        except OSError:
            seen[str(p)] = (-1, "")
            return
        digest = ""
        if stat.S_ISREG(st.st_mode):
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
        elif stat.S_ISLNK(st.st_mode):
            digest = os.readlink(p)
        seen[str(p)] = (st.st_mode, digest)

    for top in paths:
        one(top)
        if top.is_dir() and not top.is_symlink():
            for dirpath, dirnames, filenames in os.walk(top):
                for name in dirnames + filenames:
                    one(Path(dirpath) / name)
    return seen


def _limit(memory_gib: float | None) -> Callable[[], None] | None:
    if memory_gib is None:
        return None

    def apply() -> None:
        limit = int(memory_gib * GiB)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_child(case: Hostile, argv: list[str], cwd: Path) -> Outcome:
    """``python -m condcli ARGV`` in ``cwd``, offline, under the case's memory limit."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "condcli", *argv],
            cwd=cwd,
            env=env,
            input=case.stdin,
            stdin=None if case.stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=case.timeout_s,
            preexec_fn=_limit(case.memory_gib),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.id}: still running after {case.timeout_s:.0f} s")
    out, err = (stream.decode(errors="replace") for stream in (done.stdout, done.stderr))
    return Outcome(done.returncode, out, err)


def run_inline(argv: list[str], capfd: pytest.CaptureFixture[str]) -> Outcome:
    from condcli.cli.main import main

    capfd.readouterr()
    code = main(argv)
    out, err = capfd.readouterr()
    return Outcome(code, out, err)


def check(case: Hostile, tmp: Path, capfd: pytest.CaptureFixture[str]) -> Outcome:
    """Run ``case`` in ``tmp`` and assert every promise of the module docstring; returns what it printed."""
    if case.setup is not None:
        case.setup(tmp)
    watched = [tmp, *(Path(p) for p in case.watch)]
    before = snapshot(watched)
    argv = [a.replace("{tmp}", str(tmp)) for a in case.argv]
    child = case.memory_gib is not None or case.process or case.stdin is not None
    outcome = run_child(case, argv, tmp) if child else run_inline(argv, capfd)
    after = snapshot(watched)
    shown = f"exit {outcome.code}\n--- stderr:\n{outcome.stderr}\n--- stdout (head):\n{outcome.stdout[:2000]}"

    assert "Traceback" not in outcome.stderr, shown
    assert outcome.code == case.exit, shown
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    if case.exit != 0:
        assert len(lines) == 1, f"not one line on stderr:\n{shown}"
        assert lines[0].startswith("error: "), shown
    assert re.search(re.escape(case.says), outcome.stderr, re.IGNORECASE), f"expected {case.says!r}:\n{shown}"

    changed = [p for p, entry in before.items() if after.get(p) != entry]
    assert not changed, f"changed by the run: {changed}\n{shown}"
    if case.exit != 0:
        new = sorted(set(after) - set(before))
        assert not new, f"left behind by a failed run: {new}\n{shown}"
    return outcome
