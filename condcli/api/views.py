"""A report's page, figures and files, for :class:`condcli.reports.views.ReportViews` (which asks for them
by this module's name): the same HTML page and plots as ``--out``, the same CSV tables as ``--csv``."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Report = Mapping[str, Any]
CELL_HEIGHT = 720  # px: the inline page's frame in a notebook cell (the page scrolls inside it)


def _figures_spectrum(data: Report) -> dict[str, Any]:
    from condcli.plots import layers_figure, spectrum_figure

    found = {"spectrum": spectrum_figure(data)}
    layers = layers_figure(data)
    if layers is not None:
        found["layers"] = layers
    return found


def _figures_sweep(data: Report) -> dict[str, Any]:
    from condcli.plots import sweep_figure

    return {"sweep": sweep_figure(data)}


def _figures_rank(data: Report) -> dict[str, Any]:
    from condcli.plots import rank_curves_figure, rank_heatmap_figure

    return {"rank_decay": rank_curves_figure(data), "rank_heatmap": rank_heatmap_figure(data)}


def _figures_weights(data: Report) -> dict[str, Any]:
    from condcli.plots.embedding_table import embedding_table_figure

    figure = embedding_table_figure(data)
    return {} if figure is None else {"embedding_table": figure}


def _figures_track(data: Report) -> dict[str, Any]:
    from condcli.plots.track import track_figure

    return {"track": track_figure(data)}


# command → its figures (the plots --out writes, by file stem); check and compare draw none
FIGURES: dict[str, Callable[[Report], dict[str, Any]]] = {
    "spectrum": _figures_spectrum,
    "sweep-lambda": _figures_sweep,
    "rank-decay": _figures_rank,
    "track": _figures_track,
    "weights": _figures_weights,
}
PLOT_NAMES: dict[str, tuple[str, ...]] = {
    "spectrum": ("spectrum", "layers"),
    "sweep-lambda": ("sweep",),
    "rank-decay": ("rank_decay", "rank_heatmap"),
    "track": ("track",),
    "weights": ("embedding_table",),
}


def figures(data: Report) -> dict[str, Any]:
    """The report's matplotlib figures by name ({} for check and compare)."""
    make = FIGURES.get(str(data.get("command")))
    return {} if make is None else make(data)


def page(data: Report) -> str:
    """The self-contained HTML page (report.html)."""
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


def save(data: Report, folder: Path, fmt: str = "png") -> list[Path]:
    """report.json, report.html and the plots into ``folder``, written as ``--out`` writes them."""
    from condcli.cli.output import REPORT_FILES, OutputDir, html_writer, json_writer
    from condcli.plots.base import write_figures

    if fmt not in ("png", "svg", "pdf"):
        from condcli.errors import UsageError

        raise UsageError(f"`fmt={fmt}` is not known", "use png, svg or pdf")
    command = str(data.get("command"))
    names = (*REPORT_FILES, *(f"{n}.{fmt}" for n in PLOT_NAMES.get(command, ())))
    target = OutputDir(folder, names)
    return target.write(
        json_writer(dict(data)), html_writer(dict(data)), lambda f: write_figures(figures(data), f, fmt)
    )


def save_csv(data: Report, folder: Path) -> list[Path]:
    """Every table as CSV into ``folder``, written as ``--csv`` writes them."""
    from condcli.cli.output import OutputDir
    from condcli.reports.frames import CSV_NAMES, write_csv

    return OutputDir(folder, CSV_NAMES).write(lambda f: write_csv(data, f))
