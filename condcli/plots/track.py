"""The figure of ``condcli track``: κ(X), κ(X_l), μ(LA) and H(P) against the training step, drawn from its
description (:mod:`condcli.figures.track`). ``title`` and ``style`` as in :func:`condcli.plots.render`."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures import track as described
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render
from condcli.plots.style import Style, look


def track_figure(report: Report, title: bool = True, style: Style = "default") -> Figure:
    """κ(X) and κ(X + λ·I_k); then, when layers were analysed, κ(X_l), μ(LA) and H(P) per layer."""
    return render(described.track(report), title, style)


def track_plots(
    report: Report, directory: Path, fmt: str, title: bool = True, style: Style = "default"
) -> list[Path]:
    """Write "track"."""
    _check_format(fmt)
    look(style)
    return write_figures({"track": track_figure(report, title, style)}, directory, fmt, style)
