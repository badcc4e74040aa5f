"""Figures drawn from a parsed JSON report (docs/math.md#json); the only condcli package that imports
matplotlib.

What each figure shows is described once, in :mod:`condcli.figures` (the HTML page draws the same
descriptions); :mod:`.draw` draws a description as a :class:`matplotlib.figure.Figure`, never through
pyplot, so nothing global is created or left open. Convention (the paper's Figure 1): the plain X in
vermillion, the conditioned X + λ·I_k in bluish green (the Okabe–Ito palette, :mod:`condcli.figures.palette`).
Infinite values are drawn as '^' markers above the largest finite value, never dropped. Every entry point
takes ``title`` (False: no titles, for a paper's caption) and ``style`` ("default", or "paper": one column,
3.3 in wide, 8–9 pt; :mod:`.style`).
"""

from condcli.plots.base import FORMATS, json_floats, json_to_float, write_figures
from condcli.plots.draw import render
from condcli.plots.rank import rank_curves_figure, rank_decay_plots, rank_heatmap_figure
from condcli.plots.spectrum import layers_figure, spectrum_figure, spectrum_plots
from condcli.plots.style import STYLES, Style
from condcli.plots.sweep import sweep_figure, sweep_plots
from condcli.plots.track import track_figure, track_plots

__all__ = [
    "FORMATS",
    "STYLES",
    "Style",
    "json_floats",
    "json_to_float",
    "layers_figure",
    "rank_curves_figure",
    "rank_decay_plots",
    "rank_heatmap_figure",
    "render",
    "spectrum_figure",
    "spectrum_plots",
    "sweep_figure",
    "sweep_plots",
    "track_figure",
    "track_plots",
    "write_figures",
]
