"""The process: ``python -m condcli`` and the ``condcli`` console script (``condcli.__main__:run``).

This module imports nothing heavy, so that Ctrl-C and SIGTERM are handled from the first instruction, before
typer, rich and torch are imported (seconds): at any moment

- Ctrl-C (SIGINT) raises KeyboardInterrupt and SIGTERM raises :class:`condcli.errors.Stopped` where the
  program is, so that ``finally`` blocks run (an --out staging folder, a temporary file are removed); the
  process prints one line (``error: interrupted`` / ``error: terminated``) and exits 128 + the signal
  (130, 143). A second signal while the first one unwinds exits at once, with the same code. Once a signal's
  unwinding has run and its line is printed, the process ends at once (``os._exit``): the interpreter's own
  shutdown, which resets the signal handlers and joins worker threads, is no second chance for a signal to
  end it otherwise (a child that had printed its line was once seen to die by SIGINT there, exit −2).
- a stdout closed by its reader (``condcli spectrum | head -1``) ends the run silently with 141, the code of
  a process killed by SIGPIPE, as a shell pipeline expects (see :func:`condcli.cli.main.main`).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

from condcli.errors import Stopped, exit_now, signal_received, signalled

HANDLED = (signal.SIGINT, signal.SIGTERM)


def _on_signal(signum: int, frame: object) -> None:
    first = signalled()
    if first is not None:  # a second signal while the first one's cleanup runs: stop now
        os._exit(128 + first)
    signal_received(signum)  # and raised again at the next batch if a finaliser swallows what is raised here
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Stopped(signum)


def handle_signals() -> None:
    """SIGINT and SIGTERM raise where the program is (see the module docstring)."""
    for signum in HANDLED:
        signal.signal(signum, _on_signal)


def _exit(line: str, code: int) -> NoReturn:
    try:
        sys.stderr.write(f"error: {line}\n")
        sys.stderr.flush()
    except OSError:  # stderr is closed too: the exit code says it
        pass
    _end(code)


def _end(code: int) -> NoReturn:
    """Exit with ``code``: after a signal at once, the streams flushed (see the module docstring)."""
    if signalled() is None:
        sys.exit(code)
    exit_now(code)


def version_line() -> str:
    """What ``condcli --version`` prints."""
    from condcli import __version__

    return f"condcli {__version__}"


def run() -> NoReturn:
    """Run the CLI on ``sys.argv`` and exit with its code (docs/math.md#cli; 130/143 on a signal, 141 on a
    closed stdout). ``condcli --version`` alone answers before typer and the commands are imported."""
    try:
        handle_signals()
        if sys.argv[1:] == ["--version"]:
            print(version_line())
            _end(0)
        try:
            from condcli.cli.main import finish, main  # the heavy imports
        except Exception as e:  # a broken installation (or no memory for it): one line, not a traceback
            if "--debug" in sys.argv:
                raise
            out = isinstance(e, MemoryError)
            _exit(f"{'out of memory' if out else 'cannot start'} ({type(e).__name__}: {e})", 2 if out else 3)
        code = main()
        if signalled() is not None:  # the run was stopped by a signal and has said so: end now
            _end(code)
        finish(code)
    except KeyboardInterrupt:  # before main() took over (imports), or after it returned
        stop = Stopped(signal.SIGINT)
        _exit(stop.message, stop.exit_code)
    except Stopped as stop:
        _exit(stop.message, stop.exit_code)


if __name__ == "__main__":
    run()
