"""What every figure shares: colours, JSON-float parsing, inf markers, bands and deterministic saving."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

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
    kind = inputs.get("kind")
    what_of = (
        "images" if kind == "images" else f"{kind} samples" if kind else "samples"
    )  # not "images samples"
    suffix = f" ({count} {what_of})" if count is not None else ""
    return f"{what}\n{report['model']['spec']}{suffix}"


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
