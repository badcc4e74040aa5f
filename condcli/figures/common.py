"""Reading a report for its figures: the readers the page uses (an older or partial report gives NaN or
nothing, never a crash) and the title every figure shares."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from condcli.numbers import to_float
from condcli.reports.reading import as_map, as_maps, counted, floats, lam_text, stat

Report = Mapping[str, Any]

__all__ = ["Report", "as_map", "as_maps", "counting", "floats", "lam_text", "median", "title", "to_float"]


def median(agg: object) -> float:
    """The median of an AGG dict; NaN where it is null or lacks one."""
    v = stat(agg)
    return math.nan if v is None else v


def counting(n: int) -> list[float]:
    """1, 2, …, n: the singular value index."""
    return [float(i) for i in range(1, n + 1)]


def title(report: Report, what: str) -> str:
    """A figure's title: ``what``, then the model spec and the input count."""
    inputs = as_map(report.get("inputs"))
    count, kind = inputs.get("count"), inputs.get("kind")
    suffix = f" ({counted(count, kind)})" if count is not None else ""
    return f"{what}\n{as_map(report.get('model')).get('spec', '')}{suffix}"
