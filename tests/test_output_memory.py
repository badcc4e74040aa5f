"""Out of memory is exit 2 with one line saying what condcli was doing and what helps that command; a folder
that existed before is byte for byte what it was, with no staging folder left (issue 38, items 6 and 8).

Before, ``spectrum --out D`` under an address-space limit died in OpenBLAS while plotting: numpy's OpenBLAS
takes its work buffer on its first call (matplotlib's 3×3 inverse while laying out a figure) and, when it
cannot, ends the process from C with exit 1, leaving half a report in a staging folder inside D. The child
below reproduces that moment exactly: at the first figure it caps its address space just above what it maps,
takes what drawing would take, makes matplotlib's first LAPACK call, and runs out of memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile_harness import snapshot

ROOT = Path(__file__).resolve().parents[1]
FAST = ("--max-samples", "2", "--batch-size", "2")
SPECTRUM_HINT = "analyse less at once: a smaller --batch-size or --max-samples, or fewer --layers"

SQUEEZE = textwrap.dedent(
    """
    import os, resource, sys
    import numpy as np
    import matplotlib.figure as mf

    def squeezed(self, *args, **kwargs):
        mapped = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (mapped + (40 << 20), resource.RLIM_INFINITY))
        drawing = bytearray(32 << 20)  # what drawing the figure takes (its frame holds it)
        np.linalg.inv(np.eye(3))  # matplotlib's first LAPACK call: OpenBLAS takes its buffer here
        raise MemoryError

    mf.Figure.__init__ = squeezed
    from condcli.cli.main import run
    sys.argv = ["condcli", *sys.argv[1:]]
    run()
    """
)


def squeezed(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``condcli ARGS`` in a child that runs out of memory at its first figure."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-c", SQUEEZE, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    return lines[0]


def test_spectrum_out_of_memory_while_plotting_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    from condcli.cli.main import main

    run = ["spectrum", "vit-plain", *FAST, "--layers", "0", "--no-conditioned"]
    assert main([*run, "--out", str(tmp_path / "D")]) == 0  # an earlier run's report, and the user's file
    (tmp_path / "D" / "notes.txt").write_text("the user's")
    before = snapshot([tmp_path / "D"])

    done = squeezed([*run, "--layers", "none", "--out", "D"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert _one_line(done) == f"error: out of memory while writing --out D — {SPECTRUM_HINT}"
    assert snapshot([tmp_path / "D"]) == before  # byte for byte, and no staging folder
    assert done.stdout == ""


def test_weights_out_of_memory_names_only_options_weights_has(tmp_path: Path) -> None:
    from tests.tiny_llm import tiny_llama

    tiny_llama(tmp_path / "llama")  # it has an embedding table: weights --out draws its spectrum
    (tmp_path / "D").mkdir()
    done = squeezed(["weights", "llama", "--out", "D"], tmp_path)
    assert done.returncode == 2, done.stderr
    line = _one_line(done)
    assert line == "error: out of memory while writing --out D — analyse less at once: fewer --layers"
    assert "--batch-size" not in line and list((tmp_path / "D").iterdir()) == []


def _raise(error: BaseException) -> Callable[..., None]:
    def raising(*args: object, **kwargs: object) -> None:
        raise error

    return raising


@pytest.mark.parametrize(
    ("argv", "patch", "line"),
    [
        (
            ["spectrum", "vit-plain"],
            ("condcli.cli.options", "setup_run"),
            f"error: out of memory while running condcli spectrum — {SPECTRUM_HINT}",
        ),
        (
            ["weights", "vit-plain"],
            ("condcli.analysis.weights", "analyse_weights"),
            "error: out of memory while running condcli weights — analyse less at once: fewer --layers",
        ),
        (
            ["report", "r.json"],
            ("condcli.cli.report_cmd", "load_report"),
            "error: out of memory while running condcli report — free memory, or ask for less at once",
        ),
    ],
    ids=["spectrum", "weights", "report"],
)
def test_each_command_hints_with_its_own_options(
    argv: list[str],
    patch: tuple[str, str],
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    import importlib

    from condcli.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(importlib.import_module(patch[0]), patch[1], _raise(MemoryError()))
    capfd.readouterr()
    assert main(argv) == 2
    assert capfd.readouterr().err.strip() == line


def test_a_library_that_cannot_be_mapped_is_out_of_memory() -> None:
    """Under an address-space limit, importing torch fails to map libtorch_cpu.so: not a bug (exit 3)."""
    import errno

    from condcli.errors import is_out_of_memory

    assert is_out_of_memory(ImportError("libtorch_cpu.so: failed to map segment from shared object"))
    assert is_out_of_memory(OSError(errno.ENOMEM, "Cannot allocate memory"))
    assert not is_out_of_memory(ImportError("No module named 'torch'"))
    assert not is_out_of_memory(OSError(errno.ENOENT, "No such file or directory"))
