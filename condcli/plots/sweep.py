"""The κ(X + λ·I_k)-against-λ figure of ``condcli sweep-lambda``, drawn from its description
(:mod:`condcli.figures.sweep`). ``title`` and ``style`` as in :func:`condcli.plots.render`."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures import sweep as described
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render
from condcli.plots.style import Style, look


def sweep_figure(report: Report, title: bool = True, style: Style = "default") -> Figure:
    """κ(X + λ·I_k) against λ with its p10–p90 band, the Weyl bound and the reference lines; the per-layer
    sweep beside it (under it, in the paper style) where the report has one."""
    return render(described.sweep(report), title, style)


def sweep_plots(
    report: Report, directory: Path, fmt: str, title: bool = True, style: Style = "default"
) -> list[Path]:
    """Write "sweep"."""
    _check_format(fmt)
    look(style)
    return write_figures({"sweep": sweep_figure(report, title, style)}, directory, fmt, style)
