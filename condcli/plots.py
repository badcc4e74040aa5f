"""Figures drawn from a parsed JSON report (SPEC §7); the only condcli module that imports matplotlib.

Figures are built as :class:`matplotlib.figure.Figure` objects, never through pyplot, so nothing global
is created or left open. Convention (the paper's Figure 1): the plain X in red, the conditioned
X + λ·I_k in green. Infinite values are drawn as '^' markers above the largest finite value, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from condcli.errors import UsageError

FORMATS = ("png", "svg", "pdf")

PLAIN = "red"
CONDITIONED = "green"
BAND_ALPHA = 0.2
INF_MARKER = "^"
PNG_DPI = 150

# Metadata that would otherwise embed the date or version, so equal figures give equal bytes.
_METADATA: dict[str, dict[str, str | None]] = {
    "png": {"Software": None},
    "svg": {"Date": None},
    "pdf": {"CreationDate": None, "ModDate": None},
}

Report = Mapping[str, Any]
FloatArray = npt.NDArray[np.float64]


def json_to_float(value: object) -> float:
    """A JSON float of a report as a Python float: "inf"/"-inf" strings become ±inf, null becomes NaN."""
    if value is None:
        return math.nan
    if isinstance(value, str):
        return float(value)  # accepts "inf", "-inf", "nan" and numeric strings
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"not a JSON float: {value!r}")


def json_floats(values: Sequence[object]) -> FloatArray:
    """A list of JSON floats as a float64 array."""
    return np.array([json_to_float(v) for v in values], dtype=np.float64)


def _fmt(value: float) -> str:
    """A κ for a legend: three significant digits, or "inf"."""
    return ("inf" if value > 0 else "-inf") if math.isinf(value) else f"{value:.3g}"


def _positive(y: FloatArray) -> FloatArray:
    """``y`` with every value a log axis cannot show (≤ 0, ±inf, NaN) replaced by NaN."""
    return np.where(np.isfinite(y) & (y > 0), y, np.nan)


def _inf_level(*series: FloatArray) -> float:
    """Where to draw infinite values: one decade above the largest finite positive value of an axis."""
    finite = [s[np.isfinite(s) & (s > 0)] for s in series]
    top = max((float(f.max()) for f in finite if f.size), default=1.0)
    return top * 10.0


def _series(
    ax: Axes, x: FloatArray, y: FloatArray, level: float, label: str, color: Any, **style: Any
) -> None:
    """A line of the finite values of ``y`` and '^' markers at ``level`` for its +inf values."""
    ax.plot(x, _positive(y), color=color, label=label, **style)
    inf = np.isposinf(y)
    if inf.any():
        ax.plot(
            x[inf],
            np.full(int(inf.sum()), level),
            linestyle="none",
            marker=INF_MARKER,
            markersize=8,
            color=color,
            label=f"{label}: inf",
        )


def _band(ax: Axes, x: FloatArray, lo: FloatArray, hi: FloatArray, color: str, label: str) -> None:
    """A translucent p10–p90 band, skipping indices a log axis cannot show."""
    lo, hi = _positive(lo), _positive(hi)
    ok = np.isfinite(lo) & np.isfinite(hi)
    ax.fill_between(x, lo, hi, where=ok, color=color, alpha=BAND_ALPHA, linewidth=0, label=label)


def _median(agg: Mapping[str, Any] | None) -> float:
    """The median of an AGG dict (NaN for a null AGG)."""
    return math.nan if agg is None else json_to_float(agg["median"])


def _title(report: Report, what: str) -> str:
    """A title naming the model spec and the input count."""
    inputs = report.get("inputs", {})
    count = inputs.get("count")
    suffix = f" ({count} {inputs.get('kind', 'inputs')} samples)" if count is not None else ""
    return f"{what}\n{report['model']['spec']}{suffix}"


def spectrum_figure(report: Report) -> Figure:
    """Figure 1 of the paper: σ_i of X (red) and of X + λ·I_k (green) by index, log scale, p10–p90 bands."""
    emb = report["embedding"]
    lam = json_to_float(report["settings"]["lambda"])
    fig = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    below = int(emb.get("below_precision", 0) or 0)
    warn = f", ⚠ {below} below precision" if below else ""
    curves = (
        (emb["spectrum"], PLAIN, "X", f"median κ = {_fmt(_median(emb['kappa']))}{warn}"),
        (
            emb["spectrum_conditioned"],
            CONDITIONED,
            f"X + λ·I_k, λ = {lam:g}",
            f"median κ = {_fmt(_median(emb['kappa_conditioned']))}",
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
    kappa = [
        (medians("kappa"), PLAIN, "κ(X_l)", "-"),
        (medians("kappa_attn_input"), PLAIN, "κ(A_l)", "--"),
    ]
    mu = [(medians("mu_la"), PLAIN, "μ(LA)", "-")]
    if has_conditioned:
        kappa += [
            (medians("kappa", True), CONDITIONED, "κ(X_l), conditioned", "-"),
            (medians("kappa_attn_input", True), CONDITIONED, "κ(A_l), conditioned", "--"),
        ]
        mu.append((medians("mu_la", True), CONDITIONED, "μ(LA), conditioned", "-"))

    fig = Figure(figsize=(11.0, 4.5), layout="constrained")
    left, right = fig.subplots(1, 2)
    _layer_axis(left, x, kappa, "median κ")
    left.set_title("Condition numbers per layer")
    _layer_axis(right, x, mu, "median μ(LA) (max over heads)")
    right.set_title("Linear-attention bound μ(LA) per layer")
    fig.suptitle(_title(report, "Per-layer conditioning"))
    return fig


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
            ax.axhline(y, color=color, linestyle=style, label=f"{name} = {_fmt(value)}")
    if sweep.get("recommended_lambda") is not None:
        rec = json_to_float(sweep["recommended_lambda"])
        ax.axvline(rec, color="purple", linestyle=":", label=f"recommended λ = {_fmt(rec)}")
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


def _check_format(fmt: str) -> None:
    """Raise :class:`UsageError` unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown plot format {fmt!r}", f"use one of {', '.join(FORMATS)}")


def write_figures(figures: Mapping[str, Figure], directory: Path, fmt: str) -> list[Path]:
    """Save each figure as ``directory/{name}.{fmt}`` with deterministic bytes; returns the paths written."""
    _check_format(fmt)
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    # A fixed salt makes SVG element ids stable (matplotlib salts them with a random uuid otherwise).
    with mpl.rc_context({"svg.hashsalt": "condcli"}):
        for name, fig in figures.items():
            path = directory / f"{name}.{fmt}"
            dpi = PNG_DPI if fmt == "png" else "figure"
            fig.savefig(path, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
            paths.append(path)
    return paths


def spectrum_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "spectrum" and, when the report has layers, "layers"."""
    _check_format(fmt)
    figures = {"spectrum": spectrum_figure(report)}
    layers = layers_figure(report)
    if layers is not None:
        figures["layers"] = layers
    return write_figures(figures, directory, fmt)


def sweep_plots(report: Report, directory: Path, fmt: str) -> list[Path]:
    """Write "sweep"."""
    _check_format(fmt)
    return write_figures({"sweep": sweep_figure(report)}, directory, fmt)
