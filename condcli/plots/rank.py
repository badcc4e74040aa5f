"""The two charts of ``condcli rank-decay`` (Linformer, Figure 1): the normalized cumulative spectrum of P
per layer, coloured by depth, and a layers × heads heatmap of c_m. With ``conditioned`` each chart gets
a second panel for the conditioned forward, on the same scales."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from condcli.plots.base import (
    BAND_ALPHA,
    FloatArray,
    Report,
    _check_format,
    _title,
    json_floats,
    write_figures,
)

DEPTH_CMAP = "viridis"
DEPTH_RANGE = (0.15, 0.9)  # the part of DEPTH_CMAP the layers span: its near-black start hid layer 0 from 1
HEAT_CMAP = "magma"
ANNOTATE_MAX_CELLS = 400  # write c_m into every cell up to this many cells


def _panels(report: Report) -> list[tuple[Mapping[str, Any], str]]:
    """(rank_decay section, panel title) for the plain forward and, when run, the conditioned one."""
    panels = [(report["rank_decay"], "plain forward")]
    cond = report.get("rank_decay_conditioned")
    if cond is not None:
        lam = report["settings"]["lambda"]
        panels.append((cond, f"conditioned forward (X + {lam:g}·I_k)"))
    return panels


def _m_label(section: Mapping[str, Any]) -> str:
    m = section.get("index_m")
    return f"m = {m}" if m is not None else "m = round(n/4) per layer"


def _depth(layers: Sequence[Mapping[str, Any]]) -> Normalize:
    idx = [int(layer["index"]) for layer in layers]
    return Normalize(vmin=min(idx), vmax=max(max(idx), min(idx) + 1))


def _depth_cmap() -> ListedColormap:
    """DEPTH_CMAP restricted to DEPTH_RANGE, for the curves and their colour bar alike."""
    return ListedColormap(mpl.colormaps[DEPTH_CMAP](np.linspace(*DEPTH_RANGE, 256)))


def _curves(ax: Axes, section: Mapping[str, Any], norm: Normalize, title: str) -> None:
    """One median curve c_j per layer with its p10–p90 band; a dotted line at a common m."""
    cmap = _depth_cmap()
    n_max = 1
    for layer in section["layers"]:
        band = layer["cumulative"]
        median = json_floats(band["median"])
        x = np.arange(1, median.size + 1, dtype=np.float64)
        n_max = max(n_max, median.size)
        color = cmap(norm(int(layer["index"])))
        ax.fill_between(
            x,
            json_floats(band["p10"]),
            json_floats(band["p90"]),
            color=color,
            alpha=BAND_ALPHA / 2,
            linewidth=0,
        )
        ax.plot(x, median, color=color, linewidth=1.2, label=f"layer {layer['index']}")
    m = section.get("index_m")
    if m is not None:
        ax.axvline(float(m), color="gray", linestyle=":", label=f"m = {m}")
        ax.annotate(
            f"m = {m}",
            xy=(float(m), 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, 4),
            textcoords="offset points",
            fontsize="small",
            color="gray",
        )
    if n_max > 16:
        ax.set_xscale("log")
    ax.set_xlim(1, n_max)
    ax.set_xlabel("singular value index j" + (" (log scale)" if n_max > 16 else ""))
    ax.set_title(f"{title}: median over heads and samples, p10–p90", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)


def rank_curves_figure(report: Report) -> Figure:
    """Linformer's Figure 1 (left): the normalized cumulative spectrum of P, one curve per layer."""
    panels = _panels(report)
    layers = [layer for section, _ in panels for layer in section["layers"]]
    norm = _depth(layers)
    fig = Figure(figsize=(6.5 * len(panels) + 1.0, 4.5), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (section, title) in zip(axes, panels, strict=True):
        _curves(ax, section, norm, title)
    low = min(float(np.min(json_floats(layer["cumulative"]["p10"]))) for layer in layers)
    axes[0].set_ylim(max(0.0, low - 0.05), 1.02)
    axes[0].set_ylabel("c_j: share of Σσ in the j largest σ of P")
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=_depth_cmap()), ax=list(axes), label="layer")
    bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(_title(report, "Rank decay of the attention probabilities P"))
    return fig


def heat_table(section: Mapping[str, Any]) -> FloatArray:
    """layers × heads of c_m (NaN where a layer has fewer heads than the widest)."""
    rows = [json_floats(layer["heads_at_m"]) for layer in section["layers"]]
    width = max(r.size for r in rows)
    table = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        table[i, : r.size] = r
    return table


def rank_heatmap_figure(report: Report) -> Figure:
    """Linformer's Figure 1 (right): c_m for every layer and head (median over samples and windows)."""
    panels = _panels(report)
    tables = [heat_table(section) for section, _ in panels]
    finite = np.concatenate([t[np.isfinite(t)] for t in tables])
    norm = Normalize(vmin=float(finite.min()), vmax=max(float(finite.max()), float(finite.min()) + 1e-6))
    rows, cols = tables[0].shape
    fig = Figure(
        figsize=(max(4.5, 0.45 * cols + 2.5) * len(panels) + 1.0, max(3.5, 0.35 * rows + 1.8)),
        layout="constrained",
    )
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    cmap = mpl.colormaps[HEAT_CMAP]
    for ax, table, (section, title) in zip(axes, tables, panels, strict=True):
        image = ax.imshow(np.ma.masked_invalid(table), cmap=cmap, norm=norm, aspect="auto")
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_yticks(range(table.shape[0]), [str(layer["index"]) for layer in section["layers"]])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{title}: c_m, {_m_label(section)}", fontsize="medium")
        if table.size <= ANNOTATE_MAX_CELLS:
            for (i, j), v in np.ndenumerate(table):
                if np.isfinite(v):
                    dark = norm(v) < 0.5
                    ax.text(
                        j, i, f"{v:.3f}", ha="center", va="center", fontsize=6, color="w" if dark else "k"
                    )
    fig.colorbar(image, ax=list(axes), label="c_m (share of Σσ in the m largest σ)")
    fig.suptitle(_title(report, "Rank decay per layer and head"))
    return fig


def rank_decay_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "rank_decay" (the curves) and "rank_heatmap"."""
    _check_format(fmt)
    figures = {"rank_decay": rank_curves_figure(report), "rank_heatmap": rank_heatmap_figure(report)}
    return write_figures(figures, directory, fmt)
