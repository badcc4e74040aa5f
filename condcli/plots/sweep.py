"""The κ(X + λ·I_k)-against-λ figure of ``condcli sweep-lambda``, drawn from its description
(:mod:`condcli.figures.sweep`)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures import sweep as described
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render


def sweep_figure(report: Report) -> Figure:
    """κ(X + λ·I_k) against λ with its p10–p90 band, the Weyl bound and the reference lines; the per-layer
    sweep beside it where the report has one."""
    return render(described.sweep(report))


def sweep_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "sweep"."""
    _check_format(fmt)
    return write_figures({"sweep": sweep_figure(report)}, directory, fmt)
