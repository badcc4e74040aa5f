"""Numbers of a report as the page shows them: the rounding of :mod:`condcli.numbers` (shared with the CLI
tables: three significant digits, "≥ x ⚠" for floors), and the full-precision text that ``data-value``
attributes and hover titles carry."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from condcli.numbers import WARN, floor_num, rel_uncertainty, to_float
from condcli.numbers import num as shared_num
from condcli.reports.reading import floats, stat

__all__ = ["WARN", "floats", "floor_num", "full", "is_floor", "num", "rel_uncertainty", "stat", "to_float"]


def full(v: float | None) -> str:
    """Full precision: the shortest text that reads back as the same float ("Infinity" for inf, as JS
    ``Number()`` and Python ``float()`` both read it); "" for None/NaN."""
    if v is None or math.isnan(v):
        return ""
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(float(v))


def num(v: float | None, digits: int = 3) -> str:
    """:func:`condcli.numbers.num` (the CLI tables' rounding), NaN a dash as None is (a page shows JSON
    nulls and gaps as NaN)."""
    return shared_num(None if v is not None and math.isnan(v) else v, digits)


def is_floor(agg: Mapping[str, Any], statistic: str) -> bool:
    """Whether the report marks this statistic of an aggregate as only a floor (absent in older reports)."""
    marks = agg.get("floor")
    return isinstance(marks, Mapping) and marks.get(statistic) is True
