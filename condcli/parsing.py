"""JSON and TOML of the user's files, read one way: anything wrong with the text is one :class:`InputError`.

``json`` and ``tomllib`` raise a handful of exception types on hostile text besides their decode errors:
``RecursionError`` on deep nesting, ``ValueError`` on an integer with more digits than Python converts,
``UnicodeDecodeError`` on bytes that are not UTF-8. Every reader of a user file goes through here, so each of
them says which file and what to do, never a traceback or an internal error.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from condcli.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def _why(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    if isinstance(error, UnicodeDecodeError):
        return "it is not UTF-8 text"
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
    if isinstance(error, tomllib.TOMLDecodeError):
        return f"invalid TOML: {error}"
    if "integer string conversion" in str(error):
        return "it holds an integer with thousands of digits"
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"it cannot be read ({text})"


def regular_file(path: Path, what: str, hint: str) -> os.stat_result:
    """``path``'s stat (symlinks followed), refused unless it is a regular file: looked at before any
    ``open``, so no reader blocks on a FIFO or a socket, nor reads a device (/dev/zero never ends)."""
    from condcli.outpaths import kind

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what} does not exist", hint) from None
    except (OSError, ValueError) as e:  # a symlink loop, a name too long, a path through a file
        raise InputError(f"{what} cannot be read ({getattr(e, 'strerror', None) or e})", hint) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} is a folder, not a file", hint)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{what} is {kind(st.st_mode)}, not a file",
            "condcli reads only regular files (a FIFO would block it, a device never end): give a file",
        )
    return st


def read_text(path: Path, what: str, hint: str) -> str:
    """The UTF-8 text of ``path`` (a regular file, :func:`regular_file`); ``what`` names the file in the
    error (e.g. "the baseline b.json")."""
    regular_file(path, what, hint)
    try:
        return path.read_bytes().decode("utf-8")
    except IsADirectoryError:
        raise InputError(f"{what} is a folder, not a file", hint) from None
    except FileNotFoundError:
        raise InputError(f"{what} does not exist", hint) from None
    except OSError as e:
        raise InputError(f"{what} cannot be read ({e.strerror})", hint) from None
    except UnicodeDecodeError as e:
        raise InputError(f"{what}: {_why(e)}", hint) from None


def parse_json(text: str, what: str, hint: str) -> Any:
    """``json.loads(text)``; any failure (syntax, depth, an integer too long to convert) is one InputError."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise InputError(f"{what}: {_why(e)}", hint) from None


def parse_toml(text: str, what: str, hint: str) -> dict[str, Any]:
    """``tomllib.loads(text)``; any failure is one InputError."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except (ValueError, RecursionError) as e:  # TOMLDecodeError is a ValueError
        raise InputError(f"{what}: {_why(e)}", hint) from None
    return data


def read_json(path: Path, what: str, hint: str) -> Any:
    """The parsed JSON of ``path`` (see :func:`read_text` and :func:`parse_json`)."""
    return parse_json(read_text(path, what, hint), what, hint)


def read_toml(path: Path, what: str, hint: str) -> dict[str, Any]:
    """The parsed TOML of ``path`` (see :func:`read_text` and :func:`parse_toml`)."""
    return parse_toml(read_text(path, what, hint), what, hint)
