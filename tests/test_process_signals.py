"""The condcli process, run for real: Ctrl-C and SIGTERM at any moment (during the imports, the analysis, the
writing of --out) end it with one line and 128 + the signal, cleaning up; a stdout closed by its reader
ends it silently with 141; the console script's entry point imports nothing heavy before it handles them.

Where the signal lands is read from the child itself (/proc: which signals it catches, whether libtorch is
mapped yet, whether its --out staging folder exists), not guessed from a clock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--max-samples", "2", "--batch-size", "2", "--layers", "none"]


def start(args: list[str], cwd: Path, stdout: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """``python -m condcli ARGS`` in ``cwd``, offline."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "condcli", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(mask >> (signum - 1) & 1)


def maps(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def wait_for(child: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float) -> bool:
    """Poll ``ready`` until it holds (True), the child exits or ``timeout`` passes (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and child.poll() is None:
        if ready():
            return True
        time.sleep(0.001)
    return False


def finish(child: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The exit code and stderr (the child is killed after 120 s: a hang fails the test)."""
    try:
        _, err = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the child was still running 120 s after the signal")
    return child.returncode, err.decode(errors="replace")


@pytest.mark.parametrize(
    ("signum", "code", "line"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_a_signal_during_the_imports_is_one_line(tmp_path: Path, signum: int, code: int, line: str) -> None:
    child = start(["spectrum", *SMALL], tmp_path)
    # condcli's first instruction has run: it catches SIGTERM, which Python itself never does (before that,
    # the interpreter is still starting up: its site module, no code of condcli's)
    started = wait_for(child, lambda: catches(child.pid, signal.SIGTERM), 60)
    early = child.poll() is None and not maps(child.pid, "libtorch")
    child.send_signal(signum)
    assert finish(child) == (code, f"error: {line}\n")
    assert started and early, "the signal was not sent between condcli's start and torch's import"


def test_ctrl_c_during_the_analysis_is_one_line_and_130(tmp_path: Path) -> None:
    child = start(["spectrum", "--max-samples", "100000", "--layers", "none", "--no-conditioned"], tmp_path)
    assert wait_for(child, lambda: maps(child.pid, "libtorch_cpu"), 120), "torch was never imported"
    time.sleep(2.0)  # the model is built and samples are being analysed (100000 of them take minutes)
    assert child.poll() is None
    child.send_signal(signal.SIGINT)
    assert finish(child) == (130, "error: interrupted\n")


def test_sigterm_while_writing_out_cleans_up_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    old = {"report.json": b'{"old": true}\n', "notes.txt": b"mine\n"}
    for name, data in old.items():
        (out / name).write_bytes(data)

    def staging() -> bool:
        return any(p.name.startswith(".condcli") and p.is_dir() for p in out.iterdir())

    child = start(["spectrum", "--max-samples", "2", "--batch-size", "2", "--out", str(out)], tmp_path)
    assert wait_for(child, staging, 300), "no .condcli-* staging folder was ever seen in --out"
    child.send_signal(signal.SIGTERM)
    assert finish(child) == (143, "error: terminated\n")
    left = sorted(p.name for p in out.iterdir())
    assert not [name for name in left if name.startswith(".condcli") and (out / name).is_dir()], left
    assert {name: (out / name).read_bytes() for name in old} == old  # what was there before is untouched


@pytest.mark.parametrize(
    "args",
    [
        ["spectrum", *SMALL],  # the table (rich)
        ["spectrum", *SMALL, "--json"],  # print()
        ["check", *SMALL, "--max-kappa", "1"],  # a failed check: the closed stdout still wins
        ["spectrum", "--help"],  # typer's own output
    ],
    ids=["table", "json", "check", "help"],
)
def test_a_closed_stdout_ends_the_run_silently_with_141(tmp_path: Path, args: list[str]) -> None:
    read, write = os.pipe()
    child = start(args, tmp_path, stdout=write)
    os.close(write)
    os.close(read)  # the reader has gone before condcli writes a byte (`condcli … | head -0`)
    assert finish(child) == (141, "")


def test_the_console_script_handles_signals_before_the_heavy_imports(tmp_path: Path) -> None:
    """pyproject's [project.scripts] entry point: importing it loads neither typer, rich nor torch."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["condcli"].partition(":")
    probe = (
        f"import sys, {module} as m; assert callable(m.{function}); "
        "print(sorted(n for n in ('typer', 'rich', 'torch', 'click') if n in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_a_ctrl_c_a_finaliser_swallowed_is_raised_again_at_the_next_batch(tmp_path: Path) -> None:
    """Python prints and drops an exception raised inside a ``__del__``: a Ctrl-C landing there would let
    the run go on to its end. The child here swallows the first KeyboardInterrupt that way; the batch loop
    raises it again, and the run ends with one line and 130."""
    code = """
import os, signal, sys
sys.argv = ["condcli", "spectrum", "--max-samples", "100000", "--layers", "none", "--no-conditioned"]
from condcli.__main__ import run
import condcli.analysis.driver as driver

class Swallows:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, inside a finaliser
        sum(range(1000))  # bytecode for the pending signal to be handled at: its exception is dropped

drive = driver.drive

def drive_after_a_lost_ctrl_c(*args, **kwargs):
    Swallows()
    print("swallowed", file=sys.stderr, flush=True)
    return drive(*args, **kwargs)

driver.drive = drive_after_a_lost_ctrl_c
import condcli.analysis.spectrum as spectrum
spectrum.drive = drive_after_a_lost_ctrl_c
run()
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    code_, err = finish(child)
    assert code_ == 130
    assert "swallowed" in err and "Exception ignored" in err and err.endswith("error: interrupted\n")
