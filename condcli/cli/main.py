"""The Typer app and the one place that turns errors into one line on stderr and an exit code
(docs/math.md#cli).

Exit codes: 0 success · 1 a check failed · 2 bad usage or input (also: out of memory, the inputs or options
asked for more than fits) · 3 internal error · 128 + N a signal: 130 Ctrl-C, 143 SIGTERM, each with one line ·
141 stdout closed by its reader (``| head``), silently, as for a process killed by SIGPIPE.
"""

from __future__ import annotations

import atexit
import errno
import functools
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.exceptions import TyperException

from condcli import __version__
from condcli.cli.examples import EXAMPLES
from condcli.cli.flags import PARAM_FLAGS
from condcli.cli.help_format import HelpCommand, HelpGroup, examples, prose
from condcli.errors import (
    CondcliError,
    InternalError,
    OutOfMemory,
    Stopped,
    exit_now,
    is_out_of_memory,
    one_line,
)

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_STDOUT_CLOSED = 128 + 13  # as a process killed by SIGPIPE
OUT_OF_MEMORY = "out of memory — free memory, or ask for less at once"  # outside a command

app = typer.Typer(
    name="condcli",
    help="Spectral diagnostics for transformer embeddings: κ(X), conditioned tokens, attention rank decay.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    cls=HelpGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)


_state = {"debug": False}
_failed: dict[str, str | None] = {"line": None}  # the error line this run printed (torchrun: sent to rank 0)
F = TypeVar("F", bound=Callable[..., Any])


def command(name: str) -> Callable[[F], F]:
    """Register a command whose errors become one line on stderr and their exit code — also when the app
    is invoked directly (typer's CliRunner), not only through :func:`main`.

    Its docstring is its help (paragraphs kept, line breaks inside one dropped), and its help ends with
    its Examples (:data:`condcli.cli.examples.EXAMPLES`)."""

    def register(fn: F) -> F:
        hint = memory_hint(fn)

        @functools.wraps(fn)
        def handled(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except CondcliError as e:
                if _state["debug"]:
                    traceback.print_exc()
                if isinstance(e, OutOfMemory) and e.hint is None:  # the options of this command that help
                    e = OutOfMemory(e.doing, hint(cuda=False))
                raise typer.Exit(_fail(Console(stderr=True), error_line(e), e.exit_code)) from None
            # typer would turn these into a silent exit 130, a blank line and "aborted", a silent exit 1
            except KeyboardInterrupt:
                raise Stopped(signal.SIGINT) from None
            except EOFError as e:
                raise typer.Exit(_unexpected(Console(stderr=True), e)) from None
            except OSError as e:
                if stdout_closed(e):
                    raise typer.Exit(_silence_stdout()) from None
                if not is_out_of_memory(e):
                    raise
                raise typer.Exit(_out_of_memory(e, name, hint)) from None
            except Exception as e:
                if is_out_of_memory(e):
                    raise typer.Exit(_out_of_memory(e, name, hint)) from None
                refused = _model_failed(e)
                if refused is None:
                    raise
                if _state["debug"]:
                    traceback.print_exc()
                raise typer.Exit(
                    _fail(Console(stderr=True), error_line(refused), refused.exit_code)
                ) from None

        app.command(
            name,
            cls=HelpCommand,
            help=prose(fn.__doc__ or ""),
            epilog=examples(EXAMPLES[name]) if name in EXAMPLES else None,
        )(handled)
        return fn

    return register


def memory_hint(fn: Callable[..., Any]) -> Callable[..., str]:
    """What helps a command that ran out of memory, from the options it has (``weights`` has no
    --batch-size): ``hint(cuda=…)`` is the line's hint."""
    import inspect

    names = set(inspect.signature(fn).parameters)
    smaller = [PARAM_FLAGS[n] for n in ("batch_size", "max_samples") if n in names]
    parts = [f"a smaller {' or '.join(smaller)}"] if smaller else []
    parts += ["fewer --layers"] if "layers" in names else []
    text = f"analyse less at once: {', or '.join(parts)}" if parts else "free memory, or ask for less at once"

    def hint(cuda: bool) -> str:
        return text + (" (or --device cpu)" if cuda and "device" in names else "")

    return hint


def _out_of_memory(error: BaseException, name: str, hint: Callable[..., str]) -> int:
    """Out of memory inside command ``name``: one line, exit 2 (not a bug), the traceback kept for --debug."""
    if _state["debug"]:
        traceback.print_exception(error)
    cuda = type(error).__name__ == "OutOfMemoryError"
    line = error_line(OutOfMemory(f"running condcli {name}", hint(cuda=cuda)))
    return _fail(Console(stderr=True), line, EXIT_USAGE)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"condcli {__version__}")  # as condcli.__main__.version_line, without the cycle
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
    _failed["line"] = text
    console.print(f"[bold red]error:[/] {escape(one_line(text))}", highlight=False, soft_wrap=True)
    return code


def stdout_closed(error: BaseException | None) -> bool:
    """Whether ``error`` is a write to a stdout whose reader has gone: EPIPE, and stdout is that broken
    pipe; or the SystemExit that rich and typer raise on such an EPIPE (rich has already pointed stdout
    at /dev/null)."""
    if isinstance(error, SystemExit):
        context = error.__context__
        return isinstance(context, OSError) and context.errno == errno.EPIPE
    if not isinstance(error, OSError) or error.errno != errno.EPIPE:
        return False
    try:
        import select

        poll = select.poll()
    except (ImportError, AttributeError):  # pragma: no cover - no poll() (Windows): trust the errno
        return True
    try:
        poll.register(sys.__stdout__.fileno() if sys.__stdout__ else 1, select.POLLOUT)
        return any(event & select.POLLERR for _, event in poll.poll(0))
    except (OSError, ValueError):
        return True


def _silence_stdout() -> int:
    """Point stdout at /dev/null, so that nothing flushed later (at exit) fails again; the exit code."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (sys.__stdout__ or sys.stdout).fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_STDOUT_CLOSED


def out_of_memory(error: BaseException) -> bool:
    """A MemoryError, torch's OutOfMemoryError (CUDA), its CPU allocator's failure, … (see
    :func:`condcli.errors.is_out_of_memory`)."""
    return is_out_of_memory(error)


def _model_failed(error: BaseException) -> CondcliError | None:
    """An ``inputs`` refusal where ``error`` came from the model's own code inside a forward condcli ran, with
    none of condcli's code between (:func:`condcli.adapters.base.model_failure`): the model failed on the
    inputs it was given, which is no bug of condcli's. None otherwise."""
    if "torch" not in sys.modules:  # no forward ran
        return None
    from condcli.adapters.base import model_failure
    from condcli.reports.refusal import Refused

    where = model_failure(error)
    if where is None:
        return None
    said = " ".join(str(error).split())[:300] or type(error).__name__
    return Refused(
        "inputs",
        f"the model's own code failed on the inputs condcli gave it, after taking them, in {where}: "
        f"{type(error).__name__}: {said}",
        "this model needs inputs condcli does not make, or its config does not fit its code; run it on "
        "your own batch through the Python API, or describe its inputs with `adapter` "
        "(docs/guides/your-own-model.md)",
    )


def _unexpected(console: Console, error: BaseException) -> int:
    """Anything not raised on purpose: out of memory (exit 2: not a bug), a model that failed in its own
    code on the inputs it was given (exit 2, :func:`_model_failed`), else a bug in one line (exit 3), the
    traceback kept for --debug."""
    if _state["debug"]:
        traceback.print_exception(error)
    if out_of_memory(error):
        cuda = type(error).__name__ == "OutOfMemoryError"
        return _fail(console, OUT_OF_MEMORY + (" (or --device cpu)" if cuda else ""), EXIT_USAGE)
    refused = _model_failed(error)
    if refused is not None:
        return _fail(console, error_line(refused), refused.exit_code)
    line = f"internal error: {type(error).__name__}: {error}"
    return _fail(console, f"{line} (rerun with --debug for the traceback and report it)", EXIT_INTERNAL)


def main(argv: Sequence[str] | None = None, *, application: typer.Typer | None = None) -> int:
    """Run the CLI (or ``application``); return the exit code.

    Errors become one line on stderr; the traceback is printed only with ``--debug``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args  # honoured anywhere on the line, also after the command name
    args = [a for a in args if a != "--debug"]
    _state["debug"] = debug
    _failed["line"] = None
    try:
        return _across_ranks(lambda: _run(application or app, args, debug), debug)
    finally:
        _state["debug"] = False  # a later run of the app itself (typer's CliRunner) starts without it


def _across_ranks(run: Callable[[], int], debug: bool) -> int:
    """``run`` in this process; under torchrun every rank ends with the same exit code, and rank 0 alone
    speaks: the other ranks' stdout and stderr go to /dev/null (stderr kept with --debug), their error line
    is printed by rank 0 (:func:`condcli.distributed.conclude`)."""
    from condcli.distributed import conclude, start, world

    err = Console(stderr=True)
    try:
        w = world()
        if w is not None:
            if w.rank != 0:
                _quiet(debug)
            start()  # all ranks meet first: a rank lost later is seen at once, not at a first meeting
    except CondcliError as e:
        return _fail(err, error_line(e), e.exit_code)
    if w is None:
        return run()
    code = run()
    if code >= 128:  # stopped by a signal (torchrun stops every rank once one has failed): it said so
        return code
    try:
        code, line = conclude(code, _failed["line"])
    except CondcliError as e:  # the others are gone: this rank's own error, else why it cannot agree
        return code if _failed["line"] is not None else _fail(err, error_line(e), e.exit_code)
    if line is not None:
        _fail(err, line, code)
    return code


def _quiet(debug: bool) -> None:
    """Point stdout (and stderr, unless ``debug``) at /dev/null: a torchrun rank other than 0."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr) if not debug else (sys.stdout,):
        try:
            stream.flush()
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # not a real file (a test's capture): nothing to silence
            pass
    os.close(devnull)


def _run(application: typer.Typer, args: list[str], debug: bool) -> int:
    err = Console(stderr=True)
    try:
        result = application(args=args, prog_name="condcli", standalone_mode=False)
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
    except KeyboardInterrupt:  # Ctrl-C in this process (the console script turns SIGTERM into Stopped)
        return _fail(err, Stopped(signal.SIGINT).message, Stopped(signal.SIGINT).exit_code)
    except Stopped as e:
        return _fail(err, e.message, e.exit_code)
    except SystemExit as e:  # typer's own exit on a closed stdout (printing --help), or a library's
        if stdout_closed(e):
            return _silence_stdout()
        if debug:
            traceback.print_exc()
        return _fail(
            err,
            f"internal error: code condcli called ended the run with sys.exit({e.code!r}) "
            "(rerun with --debug for the traceback)",
            EXIT_INTERNAL,
        )
    except Exception as e:  # a bug (or out of memory): one line, the traceback kept for --debug
        if stdout_closed(e):
            return _silence_stdout()
        return _unexpected(err, e)
    if result == 128 + signal.SIGINT:  # typer's answer to a KeyboardInterrupt while parsing: silent
        return _fail(err, Stopped(signal.SIGINT).message, result)
    return int(result) if isinstance(result, int) else EXIT_OK


def finish(code: int) -> NoReturn:
    """Exit with ``code`` after flushing stdout (a reader that has gone: 141, silently).

    The run ends as the interpreter's shutdown would end it, less its teardown: non-daemon threads joined,
    the Python exit handlers run (temporary folders' finalizers among them), the streams flushed; then
    ``os._exit``. What it skips is freeing every module torch and transformers imported, one by one: about a
    second after the report was written, for nothing a finished run needs
    (docs/performance.md#the-end-of-the-process). A torchrun rank other than 0 that has left its process
    group joins no thread (:func:`condcli.distributed.left_as_peer`)."""
    try:
        sys.stdout.flush()
    except OSError as e:
        code = _silence_stdout() if stdout_closed(e) else code
    distributed = sys.modules.get("condcli.distributed")
    peer = distributed is not None and distributed.left_as_peer()
    shutdown = getattr(threading, "_shutdown", None)  # private: what the interpreter calls first
    if not peer and shutdown is not None:
        shutdown()
    getattr(atexit, "_run_exitfuncs")()  # noqa: B009 (private: the handlers os._exit would skip)
    exit_now(code)


def run() -> NoReturn:
    """Run the CLI and exit (the console script is :func:`condcli.__main__.run`, which also handles
    signals from the first instruction)."""
    finish(main())
