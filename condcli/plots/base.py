"""What every figure file shares: JSON-float parsing and deterministic saving."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib as mpl
import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure

from condcli.errors import UsageError
from condcli.plots.style import look

FORMATS = ("png", "svg", "pdf")

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


def _check_format(fmt: str) -> None:
    """Raise :class:`UsageError` unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown plot format {fmt!r}", f"use one of {', '.join(FORMATS)}")


def write_figures(
    figures: Mapping[str, Figure], directory: Path, fmt: str, style: str = "default"
) -> list[Path]:
    """Save each figure as ``directory/{name}.{fmt}`` with deterministic bytes, in ``style``'s settings (the
    paper's embeds TrueType fonts); returns the paths written."""
    _check_format(fmt)
    lk = look(style)
    rc = lk.rc
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    # A fixed salt makes SVG element ids stable (matplotlib salts them with a random uuid otherwise).
    with mpl.rc_context(cast(Any, {**rc, "svg.hashsalt": "condcli"})):
        for name, fig in figures.items():
            path = directory / f"{name}.{fmt}"
            dpi = lk.dpi if fmt == "png" else "figure"
            fig.savefig(path, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
            paths.append(path)
    return paths
