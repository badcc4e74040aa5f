"""A text corpus every machine has offline: the docstrings of Python's standard library.

Docstrings are read with :mod:`ast` (nothing is imported or run), whitespace-normalised to one line each,
and de-duplicated. Each docstring goes to the held-out split when a hash of where it lives (file and
definition name, not its line) says so, so the split is stable when the standard library changes a little.
The corpus depends on the Python version; its sha256 is recorded in each sample's metadata.
"""

from __future__ import annotations

import ast
import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = {
    "test",
    "tests",
    "idlelib",
    "site-packages",
    "dist-packages",
    "lib2to3",
    "turtledemo",
    "__pycache__",
    "ensurepip",
    "__phello__",
}
HELDOUT_EVERY = 20  # one docstring in 20 is held out
MIN_CHARS = 40  # shorter docstrings ("Return self==value.") teach little


@dataclass(frozen=True)
class Corpus:
    train: list[str]  # one docstring per entry, one line each
    heldout: list[str]
    sha256: str  # of train + held-out, in order
    root: str  # the standard library folder it was read from


def _docstrings(path: Path, rel: str) -> list[tuple[str, str]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                name = getattr(node, "name", "<module>")
                found.append((f"{rel}:{name}", " ".join(doc.split())))
    return found


def _held_out(where: str) -> bool:
    return int(hashlib.sha1(where.encode()).hexdigest(), 16) % HELDOUT_EVERY == 0


def stdlib_corpus(root: Path | None = None) -> Corpus:
    """The standard library's docstrings, split into train and held-out."""
    base = root or Path(sysconfig.get_paths()["stdlib"])
    train: list[str] = []
    heldout: list[str] = []
    seen: set[str] = set()
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).as_posix()
        if SKIP_DIRS.intersection(path.relative_to(base).parts[:-1]):
            continue
        for where, text in _docstrings(path, rel):
            if len(text) < MIN_CHARS or text in seen:
                continue
            seen.add(text)
            (heldout if _held_out(where) else train).append(text)
    digest = hashlib.sha256("\n".join([*train, "", *heldout]).encode()).hexdigest()
    return Corpus(train, heldout, digest, str(base))
