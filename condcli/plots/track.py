"""The figure of ``condcli track``: κ(X), κ(X_l), μ(LA) and H(P) against the training step.

Read from the report's ``track.checkpoints[i].report`` only (condcli.track_report): one point per checkpoint,
the median over samples. κ and μ on a log axis (infinite values as '^' above the largest finite one), H(P)
on a linear one from 0 to 1; the layers coloured by depth.
"""

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

from condcli.metrics import forward
from condcli.plots.base import (
    CONDITIONED,
    PLAIN,
    FloatArray,
    Report,
    _check_format,
    _inf_level,
    _median,
    _series,
    _title,
    json_to_float,
    write_figures,
)

PANELS = (("kappa", True), ("mu_la", True), ("attention_entropy", False))  # (layer metric, log y)


def _checkpoints(report: Report) -> list[Mapping[str, Any]]:
    return list(report["track"]["checkpoints"])


def _layer_series(checkpoints: Sequence[Mapping[str, Any]], key: str) -> dict[int, FloatArray]:
    """Layer index → the median of ``key`` per checkpoint (NaN where a checkpoint lacks it)."""
    series: dict[int, list[float]] = {}
    for n, point in enumerate(checkpoints):
        for layer in point["report"]["layers"]:
            values = series.setdefault(int(layer["index"]), [math.nan] * len(checkpoints))
            values[n] = _median(layer.get(key))
    return {i: np.array(v, dtype=np.float64) for i, v in sorted(series.items())}


def _step_axis(ax: Axes, log: bool) -> None:
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, which="major", alpha=0.3)


def _kappa_x(ax: Axes, steps: FloatArray, checkpoints: Sequence[Mapping[str, Any]], lam: float) -> None:
    plain = np.array([_median(p["report"]["embedding"]["kappa"]) for p in checkpoints], dtype=np.float64)
    shifted = np.array(
        [_median(p["report"]["embedding"]["kappa_conditioned"]) for p in checkpoints], dtype=np.float64
    )
    level = _inf_level(plain, shifted)
    _series(ax, steps, plain, level, "κ(X)", PLAIN, marker="o", markersize=4)
    _series(ax, steps, shifted, level, f"κ(X + {lam:g}·I_k)", CONDITIONED, marker="o", markersize=4)
    _step_axis(ax, log=True)
    ax.set_ylabel("median κ")
    ax.set_title("Embedded tokens X")
    ax.legend(loc="best", fontsize="small")


def _layers(
    fig: Figure, ax: Axes, steps: FloatArray, series: dict[int, FloatArray], key: str, log: bool
) -> None:
    label = forward(key).label
    ax.set_title(f"{label} per layer")
    ax.set_ylabel(f"median {label}")
    _step_axis(ax, log)
    observed = {i: y for i, y in series.items() if not np.isnan(y).all()}
    if not observed:
        ax.text(0.5, 0.5, "not observable for this model", ha="center", va="center", transform=ax.transAxes)
        return
    norm = Normalize(vmin=min(observed), vmax=max(max(observed), min(observed) + 1))
    cmap = mpl.colormaps["viridis"]
    level = _inf_level(*observed.values()) if log else 1.0
    for i, y in observed.items():
        if log:
            _series(ax, steps, y, level, f"layer {i}", cmap(norm(i)), marker="o", markersize=3, linewidth=1.2)
        else:
            ax.plot(
                steps, y, color=cmap(norm(i)), marker="o", markersize=3, linewidth=1.2, label=f"layer {i}"
            )
    if not log:
        ax.set_ylim(-0.02, 1.02)
    if len(observed) <= 6:
        ax.legend(loc="best", fontsize="small")
    else:
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="layer (depth)")
        bar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def track_figure(report: Report) -> Figure:
    """κ(X) and κ(X + λ·I_k); then, when layers were analysed, κ(X_l), μ(LA) and H(P) per layer."""
    checkpoints = _checkpoints(report)
    steps = np.array([float(p["step"]) for p in checkpoints], dtype=np.float64)
    lam = json_to_float(report["settings"]["lambda"])
    has_layers = any(p["report"]["layers"] for p in checkpoints)
    fig = Figure(figsize=(11.0, 8.0) if has_layers else (7.0, 4.5), layout="constrained")
    axes = fig.subplots(2, 2).ravel() if has_layers else [fig.add_subplot()]
    _kappa_x(axes[0], steps, checkpoints, lam)
    if has_layers:
        for ax, (key, log) in zip(axes[1:], PANELS, strict=True):
            _layers(fig, ax, steps, _layer_series(checkpoints, key), key, log)
    fig.suptitle(_title(report, "Conditioning against the training step"))
    return fig


def track_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "track"."""
    _check_format(fmt)
    return write_figures({"track": track_figure(report)}, directory, fmt)
