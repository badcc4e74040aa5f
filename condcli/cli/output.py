"""Where a command's files go: --out is checked before any work, and files appear whole or not at all."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from condcli.errors import UsageError

Writer = Callable[[Path], list[Path]]  # writes files into the given folder and returns them


class OutputDir:
    """An --out folder: :meth:`write` renders everything into a hidden temporary folder inside it, then
    moves each finished file into place, so an error never leaves a half-written report or plot."""

    def __init__(self, path: Path) -> None:
        self.path = path
        existing = path
        while not existing.exists():
            if existing.parent == existing:
                break
            existing = existing.parent
        if existing.exists() and not existing.is_dir():
            raise UsageError(
                f"--out {path}: {existing} is a file, not a folder", "give a folder path for --out"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"--out {path}: {existing} is not writable", "give a folder you can write to")

    def write(self, *writers: Writer) -> list[Path]:
        """Run every writer into a temporary folder, then move the files into --out; returns their paths."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".condcli-", dir=self.path))
        except OSError as e:
            raise UsageError(
                f"--out {self.path}: cannot write there ({e.strerror})", "give a writable folder"
            ) from e
        try:
            made = [f for w in writers for f in w(staging)]
            final = []
            for f in made:
                target = self.path / f.name
                os.replace(f, target)
                final.append(target)
            return final
        except OSError as e:
            raise UsageError(
                f"--out {self.path}: writing failed ({e})", "check the folder and free space"
            ) from e
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def json_writer(report: dict[str, Any], name: str = "report.json") -> Writer:
    def write(folder: Path) -> list[Path]:
        path = folder / name
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        return [path]

    return write


def emit(
    data: dict[str, Any],
    target: OutputDir | None,
    plots: Writer,
    *,
    as_json: bool,
    render: Callable[[], None],
) -> None:
    """Write --out (report.json, plots), then the JSON or the table on stdout, then what was written."""
    written = target.write(json_writer(data), plots) if target is not None else []
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        render()
    if written:
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
