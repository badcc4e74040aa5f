"""Every way a run can end reaches :func:`condcli.cli.main.main` as one line on stderr and its exit code
(docs/math.md#cli), also what typer, rich and libraries would otherwise turn into a silent code, a blank
line, a traceback or an escaping SystemExit.

The command's work is replaced by a function raising the exception (what a model, torch or a library would
raise there); the command line, the wrapper of every command and ``main`` are the real ones.
"""

from __future__ import annotations

import signal

import pytest

from condcli.cli import main
from condcli.cli import options as o
from condcli.errors import Stopped


def raising(error: BaseException) -> object:
    def setup_run(*args: object, **kwargs: object) -> None:
        raise error

    return setup_run


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (KeyboardInterrupt(), 130, "error: interrupted"),
        (Stopped(signal.SIGTERM), 143, "error: terminated"),
        (
            MemoryError(),
            2,
            "error: out of memory while running condcli spectrum — analyse less at once: a smaller"
            " --batch-size or",
        ),
        (
            RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"),
            2,
            "error: out of memory",
        ),
        (EOFError("Ran out of input"), 3, "error: internal error: EOFError: Ran out of input"),
        (SystemExit(4), 3, "error: internal error: code condcli called ended the run with sys.exit(4)"),
        (ValueError("boom"), 3, "error: internal error: ValueError: boom (rerun with --debug"),
    ],
    ids=["ctrl-c", "sigterm", "memory", "torch-cpu-oom", "eof", "sys-exit", "bug"],
)
def test_each_way_a_command_ends_is_one_line_and_its_code(
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    error: BaseException,
    code: int,
    line: str,
) -> None:
    monkeypatch.setattr(o, "setup_run", raising(error))
    capfd.readouterr()
    assert main(["spectrum", "vit-plain"]) == code
    out, err = capfd.readouterr()
    assert out == "" and err.startswith(line) and len(err.splitlines()) == 1, err


def test_the_out_of_memory_hint_names_the_device_for_a_cuda_oom(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError, by name: no GPU needed
        pass

    monkeypatch.setattr(
        o, "setup_run", raising(OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    )
    capfd.readouterr()
    assert main(["spectrum", "vit-plain"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("error: out of memory") and err.rstrip().endswith("(or --device cpu)"), err


def test_debug_keeps_the_traceback_of_an_out_of_memory(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(o, "setup_run", raising(MemoryError()))
    capfd.readouterr()
    assert main(["spectrum", "vit-plain", "--debug"]) == 2
    err = capfd.readouterr().err
    assert (
        "Traceback" in err
        and "MemoryError" in err
        and err.splitlines()[-1].startswith("error: out of memory")
    )


def test_debug_does_not_outlive_its_run(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """After ``main([..., "--debug"])``, the app run directly (typer's CliRunner) shows one line again."""
    from typer.testing import CliRunner

    from condcli.cli import app
    from condcli.errors import InputError

    monkeypatch.setattr(o, "setup_run", raising(InputError("the file is bad", "fix it")))
    assert main(["spectrum", "vit-plain", "--debug"]) == 2
    assert "Traceback" in capfd.readouterr().err
    result = CliRunner().invoke(app, ["spectrum", "vit-plain"])
    assert result.exit_code == 2 and result.stderr == "error: the file is bad — fix it\n", result.stderr
