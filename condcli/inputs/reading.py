"""Text samples read line by line in bounded chunks: never a whole line, nor a whole file, in memory.

A line is one sample. Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (Python's universal newlines, as a file
opened in text mode reads them); surrounding whitespace is stripped and blank lines are skipped. A line
longer than ``keep`` bytes keeps its first ``keep`` bytes, cut at a character boundary; the rest of it is
read in chunks and dropped. :func:`byte_bound` chooses ``keep`` from the model's maximum length, so that a
cut line still holds more tokens than the model reads.

Text is UTF-8; a leading byte-order mark is ignored. A NUL byte (binary data, or UTF-16 text) or bytes that
are not UTF-8 are one :class:`~condcli.errors.InputError` naming the file and line. ``-`` (or the path of
a pipe, such as ``/dev/stdin``) is read as it arrives; such a source can be read only once.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from condcli.errors import InputError

CHUNK = 1 << 16  # bytes per read
BYTES_PER_TOKEN = 32  # generous: English text averages 4–5 bytes per token, CJK about 3
MAX_LINE_BYTES = 1 << 22  # 4 MiB per line, whatever the model's maximum length
BOM = b"\xef\xbb\xbf"
UTF16 = (b"\xff\xfe", b"\xfe\xff")  # UTF-16 byte-order marks (little, big endian)
EOL = re.compile(rb"\r\n|\r|\n")
HINT = "give a UTF-8 text file, one sample per line"


def byte_bound(max_tokens: int) -> int:
    """The bytes of a line worth reading for a model that reads at most ``max_tokens`` tokens."""
    return min(max(max_tokens, 1) * BYTES_PER_TOKEN, MAX_LINE_BYTES)


READ: set[object] = (
    set()
)  # pipes this process has read (standard input included): a second read finds them empty


@dataclass(frozen=True)
class TextSource:
    """Where text samples come from: a file, or standard input (``path`` None)."""

    path: Path | None
    arg: str  # as the user gave it (`text=ARG` in messages)
    label: str  # the file as the user named it, or "standard input"
    once: bool  # a pipe, or standard input not redirected from a file: its lines can be read only once

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """The source as a binary stream (standard input is left open afterwards). A pipe read before, by
        this stream or another one of this process (e.g. once per model), is one InputError: it is empty."""
        if self.path is None:
            stdin = sys.stdin
            if stdin is None or stdin.closed:
                raise InputError("`text=-`: standard input is closed", "pipe the text in, or give a file")
            buffer: BinaryIO = stdin.buffer
            self._first_read(buffer)
            yield buffer
            return
        self._first_read(self.path)
        try:
            fh = self.path.open("rb")
        except OSError as e:
            raise InputError(f"`text={self.arg}` cannot be read ({e.strerror})", HINT) from None
        with fh:
            yield fh

    def _first_read(self, what: Path | BinaryIO) -> None:
        if not self.once:
            return
        try:
            st = what.stat() if isinstance(what, Path) else os.fstat(what.fileno())
            key: object = (st.st_dev, st.st_ino)
        except (OSError, ValueError):  # an in-memory stream
            key = id(what)
        if key in READ:
            raise InputError(
                f"{self.label} can be read only once, and this run reads its inputs again (once per model)",
                "save the text to a file and give `text=FILE`",
            )
        READ.add(key)


def text_source(path: Path) -> TextSource:
    """``path`` checked as a source of text samples: ``-`` is standard input; a folder, a missing or an
    unreadable path is one InputError saying which."""
    if str(path) == "-":
        return TextSource(None, "-", "standard input", once=not _regular(0))
    label = str(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        shipped = _sample_file(path)
        if shipped is None:
            raise InputError(f"`text={label}`: no such file", HINT) from None
        return TextSource(shipped, label, f"{label} (a file of the shipped samples)", once=False)
    except OSError as e:  # a symlink loop, a path component that is a file, …
        raise InputError(f"`text={label}` cannot be read ({e.strerror})", HINT) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"`text={label}` is a folder, not a file", f"{HINT}, e.g. `text={label}/lines.txt`")
    if not os.access(path, os.R_OK):
        raise InputError(f"`text={label}` cannot be read (permission denied)", HINT)
    return TextSource(path, label, label, once=stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode))


def _sample_file(path: Path) -> Path | None:
    """``SAMPLE/FILE`` (e.g. ``llama-docstrings/prompts.txt``) that is no file here but a file of a shipped
    sample, as a MODEL name that is no folder here is a sample: its path, else None."""
    from condcli.loading.samples import sample_names, samples_dir

    parts = path.parts
    if path.is_absolute() or len(parts) != 2 or parts[0] not in sample_names():
        return None
    found = samples_dir() / parts[0] / parts[1]
    return found if found.is_file() else None


def _regular(fd: int | BinaryIO) -> bool:
    """``fd`` (a descriptor or an open file) is a regular file: it can be read again from its start."""
    try:
        return stat.S_ISREG(os.fstat(fd if isinstance(fd, int) else fd.fileno()).st_mode)
    except (OSError, ValueError):  # no descriptor (an in-memory stream), or a closed one
        return False


def _nul(where: str) -> InputError:
    return InputError(
        f"{where} contains a NUL byte: it is binary data or UTF-16 text, not UTF-8",
        "save it as UTF-8 text, one sample per line",
    )


def raw_lines(read: Callable[[int], bytes], keep: int, label: str) -> Iterator[tuple[bytes, bool]]:
    """Each line's first ``keep`` bytes (its line ending excluded) and whether more of it was dropped.

    ``read(n)`` returns up to ``n`` bytes, ``b""`` at the end. Memory stays within ``keep`` + one chunk.
    """
    kept = bytearray()
    dropped = False
    number = 1
    after_cr = False  # the last chunk ended with \r: a \n starting the next one belongs to it

    def take(piece: bytes) -> None:
        nonlocal dropped
        if number == 1 and not kept and piece[:2] in UTF16:
            raise InputError(
                f"{label} is UTF-16 text, not UTF-8", "save it as UTF-8 text, one sample per line"
            )
        if b"\0" in piece:
            raise _nul(f"line {number} of {label}")
        room = keep - len(kept)
        if len(piece) > room:
            dropped = True
        kept.extend(piece[: max(room, 0)])

    while chunk := read(CHUNK):
        start = 1 if after_cr and chunk[:1] == b"\n" else 0
        after_cr = False
        for end in EOL.finditer(chunk, start):
            take(chunk[start : end.start()])
            yield bytes(kept), dropped
            kept.clear()
            dropped = False
            number += 1
            start = end.end()
            after_cr = end.group() == b"\r" and start == len(chunk)
        take(chunk[start:])
    if kept or dropped:
        yield bytes(kept), dropped


def decode(raw: bytes, cut: bool, where: str) -> str:
    """``raw`` as UTF-8; a cut line may end inside a character, which is left out."""
    try:
        if cut:
            return codecs.getincrementaldecoder("utf-8")().decode(raw, final=False)
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{where} is not UTF-8 text (byte 0x{raw[e.start]:02x} at byte {e.start + 1}: {e.reason})",
            "save it as UTF-8 text, one sample per line",
        ) from None


@dataclass
class LineCount:
    """What reading found, for the run's notes: lines cut while reading, of those taken as samples."""

    cut: int = 0


def text_lines(
    source: TextSource, keep: int, max_samples: int | None, seen: LineCount
) -> Iterator[tuple[str, str]]:
    """(``"line N"``, text) for each non-blank line of ``source``, up to ``max_samples`` of them; each line
    read up to ``keep`` bytes (``seen.cut`` counts the lines that were longer)."""
    taken = 0
    if max_samples is not None and max_samples < 1:
        return
    with source.open() as fh:
        if source.path is None and _regular(fh):
            fh.seek(0)  # standard input redirected from a file: read from its start every time
        read = getattr(fh, "read1", fh.read)
        try:
            for number, (raw, cut) in enumerate(raw_lines(read, keep, source.label), start=1):
                text = decode(
                    raw.removeprefix(BOM) if number == 1 else raw, cut, f"line {number} of {source.label}"
                )
                text = text.strip()
                if not text:
                    continue
                seen.cut += cut
                taken += 1
                yield f"line {number}", text
                if max_samples is not None and taken >= max_samples:
                    return
        except OSError as e:
            raise InputError(f"`text={source.arg}` cannot be read ({e.strerror or e})", HINT) from None
