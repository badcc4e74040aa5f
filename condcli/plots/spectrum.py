"""Figure 1 of the paper (σ_i of X and X + λ·I_k) and the per-layer κ/μ figure of ``condcli spectrum``, drawn
from their descriptions (:mod:`condcli.figures.spectrum`). ``title`` and ``style`` as in
:func:`condcli.plots.render`."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures import spectrum as described
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render
from condcli.plots.style import Style, look


def spectrum_figure(report: Report, title: bool = True, style: Style = "default") -> Figure:
    """Figure 1 of the paper: σ_i of X (vermillion) and of X + λ·I_k (bluish green) by index, log scale,
    p10–p90 bands."""
    return render(described.spectrum(report), title, style)


def layers_figure(report: Report, title: bool = True, style: Style = "default") -> Figure | None:
    """Per-layer median κ(X_l), κ(A_l) and μ(LA), plain against conditioned; None without layers."""
    desc = described.layers(report)
    return None if desc is None else render(desc, title, style)


def spectrum_plots(
    report: Report, directory: Path, fmt: str, title: bool = True, style: Style = "default"
) -> list[Path]:
    """Write "spectrum" and, when the report has layers, "layers"."""
    _check_format(fmt)
    look(style)
    figures = {"spectrum": spectrum_figure(report, title, style)}
    layers = layers_figure(report, title, style)
    if layers is not None:
        figures["layers"] = layers
    return write_figures(figures, directory, fmt, style)
