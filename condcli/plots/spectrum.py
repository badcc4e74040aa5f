"""Figure 1 of the paper (σ_i of X and X + λ·I_k) and the per-layer κ/μ figure of ``condcli spectrum``, drawn
from their descriptions (:mod:`condcli.figures.spectrum`)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from condcli.figures import spectrum as described
from condcli.plots.base import Report, _check_format, write_figures
from condcli.plots.draw import render


def spectrum_figure(report: Report) -> Figure:
    """Figure 1 of the paper: σ_i of X (red) and of X + λ·I_k (green) by index, log scale, p10–p90 bands."""
    return render(described.spectrum(report))


def layers_figure(report: Report) -> Figure | None:
    """Per-layer median κ(X_l), κ(A_l) and μ(LA), plain (red) vs conditioned (green); None without layers."""
    desc = described.layers(report)
    return None if desc is None else render(desc)


def spectrum_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "spectrum" and, when the report has layers, "layers"."""
    _check_format(fmt)
    figures = {"spectrum": spectrum_figure(report)}
    layers = layers_figure(report)
    if layers is not None:
        figures["layers"] = layers
    return write_figures(figures, directory, fmt)
