"""The κ(X + λ·I_k)-against-λ figure of ``condcli sweep-lambda``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from condcli.numbers import num
from condcli.plots.base import (
    CONDITIONED,
    PLAIN,
    FloatArray,
    Report,
    _band,
    _check_format,
    _inf_level,
    _series,
    _title,
    json_floats,
    json_to_float,
    write_figures,
)


def sweep_figure(report: Report) -> Figure:
    """κ(X + λ·I_k) against λ with its p10–p90 band, the Weyl bound and the reference lines."""
    sweep = report["sweep"]
    kappa = sweep["kappa"]
    lambdas, median, weyl = (json_floats(v) for v in (sweep["lambdas"], kappa["median"], sweep["weyl_bound"]))
    refs = [json_to_float(sweep[key]) for key in ("kappa_plain", "kappa_corrected", "target_kappa")]
    layers: Sequence[Mapping[str, Any]] | None = sweep.get("layers")

    fig = Figure(figsize=(11.0 if layers else 7.0, 4.5), layout="constrained")
    axes = fig.subplots(1, 2 if layers else 1, squeeze=False)[0]
    ax = axes[0]
    level = _inf_level(median, weyl, np.array(refs))
    _band(ax, lambdas, json_floats(kappa["p10"]), json_floats(kappa["p90"]), CONDITIONED, "p10–p90")
    _series(ax, lambdas, median, level, "κ(X + λ·I_k), median", CONDITIONED, marker="o", markersize=3)
    finite = np.isfinite(weyl) & (weyl > 0)  # "inf" = no bound at that λ (λ ≤ σ_1)
    ax.plot(lambdas[finite], weyl[finite], color="black", linestyle="--", label="Weyl bound (σ_1+λ)/(λ−σ_1)")
    styles = ((PLAIN, "-", "κ(X)"), ("tab:blue", "-.", "κ(X + C)"), ("gray", ":", "target κ"))
    for value, (color, style, name) in zip(refs, styles, strict=True):
        if not math.isnan(value):  # an infinite reference sits at the inf level, as the markers do
            y = level if math.isinf(value) else value
            ax.axhline(y, color=color, linestyle=style, label=f"{name} = {num(value)}")
    if sweep.get("recommended_lambda") is not None:
        rec = json_to_float(sweep["recommended_lambda"])
        ax.axvline(rec, color="purple", linestyle=":", label=f"recommended λ = {num(rec)}")
    _lambda_axis(ax, lambdas)
    ax.set_ylabel("κ")
    ax.set_title("Condition number of X + λ·I_k")
    ax.legend(loc="best", fontsize="small")
    if layers:
        _sweep_layers(fig, axes[1], lambdas, layers)
    fig.suptitle(_title(report, "λ sweep"))
    return fig


def _lambda_axis(ax: Axes, lambdas: FloatArray) -> None:
    """Log y; log x when every λ is positive and they span two decades or more."""
    ax.set_yscale("log")
    if lambdas.size and lambdas.min() > 0 and lambdas.max() / lambdas.min() >= 100:
        ax.set_xscale("log")
    ax.set_xlabel("λ")
    ax.grid(True, which="major", alpha=0.3)


def _sweep_layers(fig: Figure, ax: Axes, lambdas: FloatArray, layers: Sequence[Mapping[str, Any]]) -> None:
    """One κ(X_l) median curve per layer against λ, coloured by depth."""
    values = [json_floats(layer["kappa_median"]) for layer in layers]
    indices = [int(layer["index"]) for layer in layers]
    norm = Normalize(vmin=min(indices), vmax=max(max(indices), min(indices) + 1))
    cmap = mpl.colormaps["viridis"]
    level = _inf_level(*values)
    for idx, layer, y in zip(indices, layers, values, strict=True):
        _series(
            ax, lambdas, y, level, f"layer {idx} ({layer.get('name', '')})", cmap(norm(idx)), linewidth=1.2
        )
    _lambda_axis(ax, lambdas)
    ax.set_ylabel("median κ(X_l)")
    ax.set_title("Conditioned forward: κ per layer")
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="layer (depth)")
    bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def sweep_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "sweep"."""
    _check_format(fmt)
    return write_figures({"sweep": sweep_figure(report)}, directory, fmt)
