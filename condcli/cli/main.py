"""The Typer app and the one place that turns errors into one line on stderr and an exit code (SPEC §8).

Exit codes: 0 success · 1 a check failed · 2 bad usage or input · 3 internal error.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.exceptions import TyperException

from condcli import __version__
from condcli.cli.flags import PARAM_FLAGS
from condcli.errors import CondcliError, InternalError

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

app = typer.Typer(
    name="condcli",
    help="Spectral diagnostics for transformer embeddings: κ(X), conditioned tokens, attention rank decay.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


_state = {"debug": False}
F = TypeVar("F", bound=Callable[..., Any])


def command(name: str) -> Callable[[F], F]:
    """Register a command whose errors become one line on stderr and their exit code — also when the app
    is invoked directly (typer's CliRunner), not only through :func:`main`."""

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def handled(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except CondcliError as e:
                if _state["debug"]:
                    traceback.print_exc()
                raise typer.Exit(_fail(Console(stderr=True), error_line(e), e.exit_code)) from None

        app.command(name)(handled)
        return fn

    return register


def _version(value: bool) -> None:
    if value:
        typer.echo(f"condcli {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Show the full traceback of an error (anywhere on the line)."
    ),
) -> None:
    """condcli — how well conditioned are your transformer's embedded tokens and attention?"""
    _state["debug"] = _state["debug"] or debug
    # --debug is taken out of argv by main() before parsing; declared here so that --help lists it.


def error_line(error: CondcliError) -> str:
    """The one line an error prints: the parameters it names as this CLI's flags (``lam`` → --lambda)."""
    line = error.line(PARAM_FLAGS)
    if isinstance(error, InternalError):
        line += " (rerun with --debug for the traceback)"
    return line


def _fail(console: Console, text: str, code: int) -> int:
    console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    return code


def main(argv: Sequence[str] | None = None, *, application: typer.Typer | None = None) -> int:
    """Run the CLI (or ``application``); return the exit code.

    Errors become one line on stderr; the traceback is printed only with ``--debug``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args  # honoured anywhere on the line, also after the command name
    args = [a for a in args if a != "--debug"]
    _state["debug"] = debug
    err = Console(stderr=True)
    try:
        result = (application or app)(args=args, prog_name="condcli", standalone_mode=False)
    except CondcliError as e:
        if debug:
            traceback.print_exc()
        return _fail(err, error_line(e), e.exit_code)
    except typer.Exit as e:
        return int(e.exit_code)
    except typer.Abort:
        return _fail(err, "aborted", EXIT_USAGE)
    except TyperException as e:  # bad option, missing argument, …: one line, exit 2
        message = e.format_message()
        if not message:  # no arguments at all: the help was printed
            return EXIT_USAGE
        return _fail(err, f"{message} (see 'condcli --help')", EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail(err, "interrupted", 130)
    except Exception as e:  # a bug: say so in one line, keep the traceback for --debug
        if debug:
            traceback.print_exc()
        return _fail(
            err,
            f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback and report it)",
            EXIT_INTERNAL,
        )
    return int(result) if isinstance(result, int) else EXIT_OK


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
