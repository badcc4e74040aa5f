"""Errors condcli raises on purpose. Each message says what was wrong and what to do next.

The CLI turns a :class:`CondcliError` into one line on stderr and its ``exit_code`` (docs/math.md#cli):
2 for bad usage or input, 3 for an internal error. Anything else that escapes is an internal error.

Messages name the Python parameter a caller passed, marked with single backticks: `lam`, or with a value
`lam=10`. ``str(error)`` shows them as parameters (lam, lam=10); the CLI passes its parameter → flag table
(:data:`condcli.cli.flags.PARAM_FLAGS`) to :meth:`CondcliError.line` and shows its own flags instead.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Mapping
from typing import NoReturn

# `name` or `name=value`, not inside ``double backticks``
PARAM = re.compile(r"(?<!`)`([A-Za-z_][A-Za-z0-9_]*)(?:=([^`]*))?`(?!`)")


def render(text: str, flags: Mapping[str, str] | None = None) -> str:
    """``text`` with its marked parameters shown as Python parameters, or as ``flags[name]`` where given
    (a value then follows its flag after a space, as on a command line; ``True`` is the flag alone)."""

    def one(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        flag = None if flags is None else flags.get(name)
        if flag is None:
            return name if value is None else f"{name}={value}"
        return flag if value in (None, "True") else f"{flag} {value}"

    return PARAM.sub(one, text)


def one_line(text: str) -> str:
    """``text`` with its control characters (a newline in a file name, an ANSI escape) shown as escapes, so
    that a message stays one line and cannot move the terminal's cursor; printable text is kept as is."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def params(text: str) -> tuple[str, ...]:
    """The parameter names marked in ``text``, in order of appearance."""
    return tuple(match.group(1) for match in PARAM.finditer(text))


class CondcliError(Exception):
    """Base class: ``message`` says what went wrong, ``hint`` what to do about it (parameters marked)."""

    exit_code = 3

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.line())

    def line(self, flags: Mapping[str, str] | None = None) -> str:
        """The error in one line: parameters as Python names, or as CLI flags given ``flags``."""
        return render(f"{self.message} — {self.hint}" if self.hint else self.message, flags)

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters the message and hint name (each once, in order)."""
        return tuple(dict.fromkeys(params(f"{self.message} {self.hint or ''}")))


class UsageError(CondcliError):
    """The command line or a config asks for something that cannot be done."""

    exit_code = 2


class ParameterTypeError(UsageError, TypeError):
    """A parameter of the wrong type (``device=5``, ``layers=3.5``): a :class:`UsageError` (exit 2 in the CLI)
    that is also the ``TypeError`` a Python caller expects."""


def a_type(value: object) -> str:
    """``value``'s type for an error: "an int", "a str", "a DataLoader"."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


class InputError(CondcliError):
    """The data given to condcli (a matrix, a file, a model) is unusable."""

    exit_code = 2


class NonFiniteInputError(InputError):
    """A matrix holds NaN or ±Inf, so no spectrum of it means anything.

    ``sample`` is the index of the first offending matrix along the flattened leading (batch) dimensions;
    callers that stream batches add their batch offset with :meth:`shifted`.
    """

    def __init__(self, sample: int, bad_entries: int, total_samples: int, offset: int = 0) -> None:
        self.sample = sample
        self.bad_entries = bad_entries
        self.total_samples = total_samples
        self.offset = offset
        where = f"sample {offset + sample}" if total_samples > 1 or offset else "the matrix"
        super().__init__(
            f"{where} contains {bad_entries} NaN/Inf value(s); no condition number is defined for it",
            "check the model's inputs and dtype (an overflow in float16/bfloat16 is the usual cause; "
            "rerun with `dtype=float32`)",
        )

    def shifted(self, offset: int) -> NonFiniteInputError:
        """The same error, naming the sample by its index in the whole input stream."""
        return NonFiniteInputError(self.sample, self.bad_entries, self.total_samples, self.offset + offset)


class OutOfMemory(CondcliError):
    """The run needed more memory than there is (or than the address-space limit allows) while ``doing``
    something; not a bug, and the input was not wrong, but too much at once: exit 2. The CLI adds the
    options of the command that ask for less (:attr:`hint` None here)."""

    exit_code = 2

    def __init__(self, doing: str, hint: str | None = None) -> None:
        self.doing = doing
        super().__init__(f"out of memory while {doing}", hint)


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says memory ran out: a MemoryError, torch's OutOfMemoryError (CUDA), its CPU
    allocator's failure, an OSError ENOMEM, or a shared library that could not be mapped (the address
    space is full)."""
    import errno

    if isinstance(error, (MemoryError, OutOfMemory)) or type(error).__name__ == "OutOfMemoryError":
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return True
    text = str(error)
    if isinstance(error, RuntimeError) and "can't allocate memory" in text:
        return True
    return isinstance(error, ImportError) and (
        "failed to map segment" in text or "cannot allocate memory" in text.lower()
    )


class InternalError(CondcliError):
    """A bug in condcli: the CLI adds how to get the traceback and asks the user to report it."""

    exit_code = 3


_signals: list[int] = []  # the signal this process's entry point handles (:mod:`condcli.__main__`), if any


def signal_received(signum: int) -> None:
    """Record a signal the entry point is raising (:func:`stop_if_signalled` raises it again if lost)."""
    _signals.append(signum)


def signalled() -> int | None:
    """The signal the entry point is handling (the first it received), else None."""
    return _signals[0] if _signals else None


def stop_if_signalled() -> None:
    """Raise again a signal whose exception was lost: raised while a finaliser (``__del__``, a weakref
    callback) ran, Python prints and drops it, and the run would go on to its end. The batch loop calls
    this before each batch (:func:`condcli.analysis.driver.drive`)."""
    signum = signalled()
    if signum is not None:
        raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr and end the process with ``code`` at once (``os._exit``: no interpreter
    shutdown): the entry point after a signal (:mod:`condcli.__main__`), and the CLI after a run, once it
    has run what of that shutdown a finished run needs (:func:`condcli.cli.main.finish`)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or its reader gone: the exit code says it
            pass
    os._exit(code)


class Stopped(BaseException):
    """A signal asked the process to stop (SIGTERM; Ctrl-C is Python's own KeyboardInterrupt).

    Raised where the program is, like KeyboardInterrupt, so that ``finally`` blocks run (an --out staging
    folder is removed); a BaseException, so that no ``except Exception`` swallows it. The CLI exits with
    128 + ``signum`` and one line.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def message(self) -> str:
        """What the CLI prints after ``error:``."""
        return "interrupted" if self.signum == signal.SIGINT else "terminated"
