"""Where a command's files go: --out and --csv are checked before any work (:func:`outputs`), and every
file comes from the one writer of report files (:mod:`condcli.writing.report_files`), the same one that
``report.save()`` and ``report.write_csv()`` call in Python."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from condcli.outpaths import Inputs
from condcli.writing.folder import MANIFEST, REPORT_FILES, OutputDir, Writer
from condcli.writing.report_files import (
    Outputs,
    csv_writer,
    html_writer,
    json_writer,
    plan,
    report_json,
)

__all__ = [
    "MANIFEST",
    "REPORT_FILES",
    "OutputDir",
    "Outputs",
    "Writer",
    "csv_writer",
    "emit",
    "html_writer",
    "json_writer",
    "outputs",
    "path_option",
    "report_json",
]


def path_option(text: str) -> Path:
    """Typer parser of an output path option: an empty value (an unset CI variable) is refused rather
    than read as the current folder."""
    if not text.strip():
        raise typer.BadParameter("it is empty: give a path")
    return Path(text)


def outputs(
    command: str, out: Path | None, csv: Path | None, inputs: Inputs = (), fmt: str = "png"
) -> Outputs:
    """The run's --out and --csv folders, checked before any work. ``--out D --csv D`` is one folder (the
    report, its page, plots and CSV tables under one manifest); a --csv folder of its own replaces only the
    CSV tables of an earlier run, never the report an --out run wrote there."""
    return plan(command, out, csv, inputs, fmt=fmt)


def emit(
    data: dict[str, Any],
    files: Outputs,
    *,
    as_json: bool,
    render: Callable[[], None],
    title: bool = True,
    style: str = "default",
) -> None:
    """Write the run's files (``files``: report.json, report.html, plots, CSV tables), then the JSON or the
    table on stdout, then what was written.

    Under torchrun rank 0 alone does (every rank holds the same report)."""
    from condcli.distributed import is_writer

    if not is_writer():
        return
    written = files.write(data, title=title, style=style)
    if as_json:
        print(report_json(data))
    else:
        render()
    if written:
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
