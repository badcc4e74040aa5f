"""The CLI skeleton: --help, --version, python -m condcli, and errors as one line with the right exit code."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from click.testing import Result

from condcli import __version__
from condcli.cli import main
from condcli.errors import InputError, NonFiniteInputError, UsageError


def test_version_and_help(cli: Callable[..., Result]) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"condcli {__version__}\n"
    result = cli("--help")
    assert result.exit_code == 0
    assert "Spectral diagnostics" in result.stdout


def test_python_dash_m_and_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "condcli", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"condcli {__version__}"
    script = Path(sys.executable).parent / "condcli"
    if not script.exists():
        pytest.skip("console script not installed next to this interpreter (not a `make install` venv)")
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"condcli {__version__}"


def _app_raising(exc: BaseException) -> typer.Typer:
    test_app = typer.Typer()

    @test_app.command()
    def boom(n: int = 1) -> None:
        raise exc

    @test_app.command()
    def ok() -> None:
        typer.echo("fine")

    return test_app


@pytest.mark.parametrize(
    ("exc", "code", "text"),
    [
        (
            InputError("no images in ./imgs", "pass --images DIR with .png/.jpg files"),
            2,
            "no images in ./imgs — pass",
        ),
        (UsageError("--range 5 1 is reversed", "give LO < HI"), 2, "--range 5 1 is reversed"),
        (NonFiniteInputError(3, 7, 8), 2, "sample 3 contains 7 NaN/Inf"),
        (ValueError("bug"), 3, "internal error: ValueError: bug (rerun with --debug"),
    ],
)
def test_errors_become_one_line_and_exit_code(
    exc: BaseException, code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["boom"], application=_app_raising(exc)) == code
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and text in lines[0]
    assert "Traceback" not in captured.err


def test_debug_shows_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["boom", "--debug"], application=_app_raising(ValueError("bug"))) == 3
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["nosuch"], ["boom", "--n", "x"], ["boom", "--bogus"]])
def test_bad_usage_is_exit_2_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv, application=_app_raising(ValueError())) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ")


def test_success_is_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ok"], application=_app_raising(ValueError())) == 0
    assert capsys.readouterr().out == "fine\n"
    assert main(["--version"]) == 0


@pytest.mark.parametrize(
    "args",
    [
        ["models"],
        ["inspect", "vit-plain", "--max-samples", "1"],
        ["spectrum", "vit-plain", "--max-samples", "1", "--layers", "none"],
        ["sweep-lambda", "vit-plain", "--max-samples", "1", "--steps", "2"],
        ["rank-decay", "vit-plain", "--max-samples", "1", "--layers", "0"],
        ["check", "vit-plain", "--max-samples", "1", "--max-kappa", "1e6"],
    ],
)
def test_every_report_starts_with_the_same_envelope(args: list[str], cli: Callable[..., Result]) -> None:
    """docs/math.md#json: schema_version, tool {name, version} (+ torch, for baselines), command — for every
    command."""
    import json

    import torch

    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["schema_version"] == 1 and r["command"] == args[0]
    assert r["tool"] == {"name": "condcli", "version": __version__, "torch": torch.__version__}
