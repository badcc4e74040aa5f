"""Figure 1 of the paper (σ_i of X and X + λ·I_k) and the per-layer κ/μ figure of ``condcli spectrum``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from condcli.metrics import forward
from condcli.numbers import measured, num, rel_uncertainty
from condcli.plots.base import (
    CONDITIONED,
    PLAIN,
    FloatArray,
    Report,
    _band,
    _check_format,
    _inf_level,
    _median,
    _positive,
    _series,
    _title,
    json_floats,
    json_to_float,
    write_figures,
)


def spectrum_figure(report: Report) -> Figure:
    """Figure 1 of the paper: σ_i of X (red) and of X + λ·I_k (green) by index, log scale, p10–p90 bands."""
    emb = report["embedding"]
    lam = json_to_float(report["settings"]["lambda"])
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    below = int(emb.get("below_precision", 0) or 0)
    warn = f", ⚠ {below} below precision" if below else ""
    curves = (
        (
            emb["spectrum"],
            PLAIN,
            "X",
            f"median κ = {measured(_median(emb['kappa']), rel_uncertainty(emb['kappa'], 'median'))}{warn}",
        ),
        (
            emb["spectrum_conditioned"],
            CONDITIONED,
            f"X + λ·I_k, λ = {lam:g}",
            f"median κ = {num(_median(emb['kappa_conditioned']))}",
        ),
    )
    for band, color, name, kappa in curves:
        median = json_floats(band["median"])
        x = np.arange(1, median.size + 1, dtype=np.float64)
        _band(ax, x, json_floats(band["p10"]), json_floats(band["p90"]), color, f"{name}: p10–p90")
        ax.plot(x, _positive(median), color=color, label=f"{name} ({kappa})", linewidth=1.5)
    ax.set_yscale("log")
    ax.set_xlabel("singular value index i")
    ax.set_ylabel("σ_i")
    ax.set_title(_title(report, "Singular values of the embedded tokens X"))
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    return fig


def _layer_axis(
    ax: Axes, x: FloatArray, curves: Sequence[tuple[FloatArray, str, str, str]], ylabel: str
) -> None:
    """One per-layer axis: each curve is (values, color, label, linestyle), infinite values as markers."""
    level = _inf_level(*(c[0] for c in curves))
    for values, color, label, linestyle in curves:
        _series(ax, x, values, level, label, color, linestyle=linestyle, marker="o", markersize=4)
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="best", fontsize="small")


def layers_figure(report: Report) -> Figure | None:
    """Per-layer median κ(X_l), κ(A_l) and μ(LA), plain (red) vs conditioned (green); None without layers."""
    layers: Sequence[Mapping[str, Any]] = report["layers"]
    if not layers:
        return None
    x = np.array([float(layer["index"]) for layer in layers])

    def medians(key: str, conditioned: bool = False) -> FloatArray:
        src = [(layer["conditioned"] or {}) if conditioned else layer for layer in layers]
        return np.array([_median(s.get(key)) for s in src], dtype=np.float64)

    has_conditioned = any(layer.get("conditioned") is not None for layer in layers)
    lines = (("kappa", "-"), ("kappa_attn_input", "--"))  # the left panel's metrics (registry keys)
    kappa = [(medians(key), PLAIN, forward(key).label, style) for key, style in lines]
    mu_la = forward("mu_la").label
    mu = [(medians("mu_la"), PLAIN, mu_la, "-")]
    if has_conditioned:
        kappa += [
            (medians(key, True), CONDITIONED, f"{forward(key).label}, conditioned", style)
            for key, style in lines
        ]
        mu.append((medians("mu_la", True), CONDITIONED, f"{mu_la}, conditioned", "-"))

    fig = Figure(figsize=(11.0, 4.5), layout="constrained")
    left, right = fig.subplots(1, 2)
    _layer_axis(left, x, kappa, "median κ")
    left.set_title("Condition numbers per layer")
    _layer_axis(right, x, mu, f"median {mu_la} (max over heads)")
    right.set_title(f"Linear-attention bound {mu_la} per layer")
    fig.suptitle(_title(report, "Per-layer conditioning"))
    return fig


def spectrum_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "spectrum" and, when the report has layers, "layers"."""
    _check_format(fmt)
    figures = {"spectrum": spectrum_figure(report)}
    layers = layers_figure(report)
    if layers is not None:
        figures["layers"] = layers
    return write_figures(figures, directory, fmt)
