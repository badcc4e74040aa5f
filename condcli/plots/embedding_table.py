"""The embedding table's singular spectrum (log σ_i against i), drawn from its description
(:mod:`condcli.figures.embedding_table`)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures.embedding_table import embedding_table
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render


def embedding_table_figure(report: Report) -> Figure | None:
    """σ_i of E (and an untied output head) by index, log y; None where the report has no table."""
    desc = embedding_table(report)
    return None if desc is None else render(desc)


def embedding_table_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "embedding_table.{fmt}" where the report has a table (nothing otherwise)."""
    _check_format(fmt)
    figure = embedding_table_figure(report)
    return [] if figure is None else write_figures({"embedding_table": figure}, directory, fmt)
