"""The two charts of ``condcli rank-decay`` (Linformer, Figure 1): the normalized cumulative spectrum of P
per layer, coloured by depth, and a layers × heads heatmap of c_m; with ``conditioned`` each chart gets a
second panel for the conditioned forward, on the same scales. Drawn from their descriptions
(:mod:`condcli.figures.rank`); ``title`` and ``style`` as in :func:`condcli.plots.render`."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures import rank as described
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render
from condcli.plots.style import Style, look


def rank_curves_figure(report: Report, title: bool = True, style: Style = "default") -> Figure:
    """Linformer's Figure 1 (left): the normalized cumulative spectrum of P, one curve per layer."""
    return render(described.curves(report), title, style)


def rank_heatmap_figure(report: Report, title: bool = True, style: Style = "default") -> Figure:
    """Linformer's Figure 1 (right): c_m for every layer and head (median over samples and windows)."""
    return render(described.heatmap(report), title, style)


def rank_decay_plots(
    report: Report, directory: Path, fmt: str, title: bool = True, style: Style = "default"
) -> list[Path]:
    """Write "rank_decay" (the curves) and "rank_heatmap"."""
    _check_format(fmt)
    look(style)
    figures = {
        "rank_decay": rank_curves_figure(report, title, style),
        "rank_heatmap": rank_heatmap_figure(report, title, style),
    }
    return write_figures(figures, directory, fmt, style)
