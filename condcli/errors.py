"""Errors condcli raises on purpose. Each message says what was wrong and what to do next.

The CLI turns a :class:`CondcliError` into one line on stderr and its ``exit_code`` (SPEC §8):
2 for bad usage or input, 3 for an internal error. Anything else that escapes is an internal error.
"""

from __future__ import annotations


class CondcliError(Exception):
    """Base class: ``message`` says what went wrong, ``hint`` what to do about it."""

    exit_code = 3

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        """The one line the CLI prints."""
        return f"{self.message} — {self.hint}" if self.hint else self.message


class UsageError(CondcliError):
    """The command line or a config asks for something that cannot be done."""

    exit_code = 2


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
            "rerun with --dtype float32)",
        )

    def shifted(self, offset: int) -> NonFiniteInputError:
        """The same error, naming the sample by its index in the whole input stream."""
        return NonFiniteInputError(self.sample, self.bad_entries, self.total_samples, self.offset + offset)


class InternalError(CondcliError):
    """A bug in condcli: the CLI asks the user to rerun with --debug and report it."""

    exit_code = 3
