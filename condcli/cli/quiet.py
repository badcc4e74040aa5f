"""``--quiet``: a command's body runs with Python's stderr silenced, so no progress bar, no ``note:`` or
``warning:`` line and no ``wrote …`` line is shown; the table or JSON on stdout is printed as ever, less the
report's notes under the tables (:data:`QUIET`, read by :func:`condcli.cli.tables.notes`).

An error still prints its one line: it leaves the body as an exception, stderr is restored on the way out,
and :func:`condcli.cli.main.command` prints it after.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from contextvars import ContextVar

QUIET: ContextVar[bool] = ContextVar("quiet", default=False)  # inside a --quiet command body


class _Discard(io.TextIOBase):
    """A text stream that drops what is written (and is no terminal: rich shows no progress bar on it)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def quieted(quiet: bool) -> Iterator[None]:
    """Inside: ``sys.stderr`` drops everything when ``quiet``."""
    if not quiet:
        yield
        return
    token = QUIET.set(True)
    try:
        with contextlib.redirect_stderr(_Discard()):
            yield
    finally:
        QUIET.reset(token)
