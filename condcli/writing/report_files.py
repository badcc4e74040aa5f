"""The one writer of a report's files: ``--out``, ``--csv``, ``report.save()``, ``report.write_csv()`` and
``report.plot()`` all come through here, so that they cannot drift apart.

- :func:`figures`: a report's matplotlib figures by file stem (:data:`PLOT_NAMES` declares them per
  command before any work);
- :func:`plan`: the folders of a run, checked before any work. ``--out D --csv D`` is one folder: the
  report, its page, its plots and its CSV tables under one manifest. A ``--csv`` folder of its own replaces
  only the CSV tables of an earlier run there, never a report an ``--out`` run wrote;
- :meth:`Outputs.write`: the files themselves, whole or not at all
  (:class:`condcli.writing.folder.OutputDir`).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condcli.commands import BY_NAME, COMMANDS
from condcli.errors import ParameterTypeError, UsageError, a_type
from condcli.outpaths import Inputs
from condcli.writing.folder import REPORT_FILES, OutputDir, Writer

Report = Mapping[str, Any]
FORMATS = ("png", "svg", "pdf")  # condcli.plots.FORMATS
CELL_HEIGHT = 720  # px: the inline page's frame in a notebook cell (the page scrolls inside it)

# command → the stems of the figures it may draw (--out declares them before any work; a report without
# layers or without an embedding table draws fewer); check and compare draw none
PLOT_NAMES: dict[str, tuple[str, ...]] = {c.name: c.plots for c in COMMANDS if c.plots}  # the registry's


def check_format(fmt: str, param: str = "fmt") -> str:
    """``fmt`` if it is a plot format, else a :class:`UsageError` naming ``param``."""
    if fmt not in FORMATS:
        raise UsageError(f"`{param}={fmt}` is not a plot format", f"use {', '.join(FORMATS)}")
    return fmt


def out_names(command: str, fmt: str) -> tuple[str, ...]:
    """Every file an ``--out`` folder of ``command`` may receive (the manifest aside)."""
    return (*REPORT_FILES, *(f"{stem}.{fmt}" for stem in PLOT_NAMES.get(command, ())))


def csv_names() -> tuple[str, ...]:
    """Every file a ``--csv`` folder may receive (the manifest aside)."""
    from condcli.reports.frames import CSV_NAMES

    return CSV_NAMES


def figures(data: Report, title: bool = True, style: str = "default") -> dict[str, Any]:
    """The report's matplotlib figures by file stem, in :data:`PLOT_NAMES` order ({} for check and
    compare); ``title`` and ``style`` as in :func:`condcli.plots.render`."""
    command = str(data.get("command"))
    stems = PLOT_NAMES.get(command, ())
    if not stems:
        return {}
    from condcli.plots.style import look

    look(style)  # an unknown style: one line naming `style`
    drawn = _draw(command, data, title, style)
    return {stem: drawn[stem] for stem in stems if drawn.get(stem) is not None}


def _draw(command: str, data: Report, title: bool, style: Any) -> dict[str, Any]:
    """Each figure the command registry declares for ``command``: its builder's description of ``data``
    drawn by :func:`condcli.plots.render` (None where the builder has nothing to draw)."""
    import importlib

    from condcli.plots import render

    drawn: dict[str, Any] = {}
    for stem, builder in BY_NAME[command].figures:
        module, _, name = builder.partition(":")
        desc = getattr(importlib.import_module(module), name)(data)
        drawn[stem] = None if desc is None else render(desc, title, style)
    return drawn


def report_json(report: Report) -> str:
    """The one text of a report, as --json prints it and report.json holds it (tests validate every report
    against the shipped JSON Schema here)."""
    return json.dumps(report, indent=2)


def page(data: Report) -> str:
    """The self-contained HTML page (report.html) of any command's report."""
    from condcli.html import render_html

    return render_html(data)


def inline(data: Report) -> str:
    """The page for a notebook cell: the same page in a frame of its own (its styles and scripts apply to
    it alone), full width and :data:`CELL_HEIGHT` high, with no external reference."""
    doc = html.escape(page(data), quote=True)
    return (
        f'<iframe srcdoc="{doc}" style="width: 100%; height: {CELL_HEIGHT}px; border: 1px solid #ddd;" '
        'sandbox="allow-scripts"></iframe>'
    )


def json_writer(report: Report, name: str = "report.json") -> Writer:
    """A writer of report.json."""

    def write(folder: Path) -> list[Path]:
        path = folder / name
        path.write_text(report_json(report) + "\n", encoding="utf-8")
        return [path]

    return write


def html_writer(report: Report, name: str = "report.html") -> Writer:
    """A writer of the report's page (:func:`page`)."""

    def write(folder: Path) -> list[Path]:
        path = folder / name
        path.write_text(page(report), encoding="utf-8")
        return [path]

    return write


def plots_writer(report: Report, fmt: str, title: bool = True, style: str = "default") -> Writer:
    """A writer of :func:`figures` as ``<stem>.<fmt>``."""

    def write(folder: Path) -> list[Path]:
        drawn = figures(report, title, style)
        if not drawn:
            return []
        from condcli.plots.base import write_figures

        return write_figures(drawn, folder, fmt, style)

    return write


def csv_writer(report: Report) -> Writer:
    """A writer of the report's tables as CSV (:mod:`condcli.reports.frames`, the standard library's csv)."""

    def write(folder: Path) -> list[Path]:
        from condcli.reports.frames import write_csv

        return write_csv(report, folder)

    return write


def warm_blas() -> None:
    """Make numpy's first BLAS/LAPACK call now, before any work.

    OpenBLAS allocates its work buffer on its first call and, when that fails (an address-space limit),
    ends the process from C (exit 1, no Python clean-up: a staging folder left behind). The first such
    call of a run is matplotlib's (a 3×3 inverse per axis) while the plots are drawn, after the analysis
    has taken its memory; made here, the buffer is taken while memory is plentiful and reused later."""
    import numpy as np

    np.linalg.inv(np.eye(3))


@dataclass(frozen=True)
class Outputs:
    """A run's output folders, checked before any work: ``out`` (report.json, report.html, the plots and,
    with ``csv_in_out``, the CSV tables) and ``tables`` (the CSV tables in a folder of their own)."""

    out: OutputDir | None
    tables: OutputDir | None
    fmt: str = "png"
    csv_in_out: bool = False

    @property
    def folders(self) -> tuple[OutputDir, ...]:
        return tuple(d for d in (self.out, self.tables) if d is not None)

    def write(self, data: Report, *, title: bool = True, style: str = "default") -> list[Path]:
        """Every file of ``data`` into its folder; returns the paths written."""
        written: list[Path] = []
        if self.out is not None:
            writers = [json_writer(data), html_writer(data), plots_writer(data, self.fmt, title, style)]
            written += self.out.write(*writers, *([csv_writer(data)] if self.csv_in_out else []))
        if self.tables is not None:
            written += self.tables.write(csv_writer(data))
        return written


def same_folder(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one folder (symlinks and relative parts resolved; either may not
    exist yet)."""
    return os.path.realpath(a) == os.path.realpath(b)


def plan(
    command: str,
    out: Path | None,
    csv: Path | None,
    inputs: Inputs = (),
    *,
    fmt: str = "png",
    params: Sequence[str] = ("out", "csv"),
) -> Outputs:
    """The folders of a run of ``command``, checked before any work (see the module docstring).
    ``params``: the parameters that name ``out`` and ``csv`` in errors (the CLI shows their flags)."""
    if out is not None and PLOT_NAMES.get(command):
        warm_blas()
    if out is not None and csv is not None and same_folder(out, csv):
        names = (*out_names(command, fmt), *csv_names())
        return Outputs(OutputDir(out, names, inputs, params[0]), None, fmt, csv_in_out=True)
    target = OutputDir(out, out_names(command, fmt), inputs, params[0]) if out is not None else None
    tables = OutputDir(csv, csv_names(), inputs, params[1], only_own=True) if csv is not None else None
    return Outputs(target, tables, fmt)


def save(data: Report, folder: str | Path, fmt: str = "png") -> list[Path]:
    """report.json, report.html and the plots into ``folder``: the files ``--out`` writes."""
    check_format(fmt)
    command = str(data.get("command"))
    return plan(command, _folder(folder), None, fmt=fmt, params=("folder", "folder")).write(data)


def save_csv(data: Report, folder: str | Path) -> list[Path]:
    """Every table as CSV into ``folder``: the files ``--csv`` writes."""
    return plan(str(data.get("command")), None, _folder(folder), params=("folder", "folder")).write(data)


def _folder(folder: Any) -> Path:
    if isinstance(folder, (str, os.PathLike)) and not isinstance(folder, bytes):
        return Path(folder)
    raise ParameterTypeError(f"`folder` is {a_type(folder)}", "give a folder path (a str or a Path)")
