"""How condcli writes a number for a reader, in one place: the CLI tables, the HTML report and the figures'
legends round the same way (three significant digits; a floor "≥ x", two digits; inf as "inf")."""

from __future__ import annotations

import math
from collections.abc import Mapping

# marks a value of which some samples were below the capture dtype's resolution (docs/math.md#spectra)
WARN = "⚠"


def num(v: float | None, digits: int = 3) -> str:
    """``digits`` significant digits (three, as the tables print them); inf stays "inf"; None (not
    observable) is a dash."""
    if v is None:
        return "—"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def floor_num(v: float) -> str:
    """A floor: "≥ 3.1e+04" — two significant digits, the true value is at least this
    (docs/math.md#spectra)."""
    return "≥ inf" if math.isinf(v) else f"≥ {v:.2g}"


def fmt_pair(value: float, limit: float) -> tuple[str, str]:
    """(value, limit) printed so that they never look equal unless they are: 3 significant digits for the
    value and up to 6 for the limit (a number a person typed) where that tells them apart, else both
    with the first number of digits at which they differ."""
    if value == limit:
        return num(value, 6), num(limit, 6)
    if num(value, 3) != num(limit, 3):
        return num(value, 3), num(limit, 6)
    for digits in range(4, 18):
        if num(value, digits) != num(limit, digits):
            return num(value, digits), num(limit, digits)
    return repr(value), repr(limit)


APPROX = "≈"  # marks a value printed with fewer digits: only those its capture's rounding supports


def supported_digits(v: float, rel: float | None, digits: int = 3) -> int:
    """How many significant digits of ``v`` its relative uncertainty ``rel`` supports (at most ``digits``):
    the last one shown is the place of the uncertainty's leading digit; 0 where none is (rel ≥ 1, the value
    has no upper end). ``rel`` None or 0: all ``digits``."""
    if not rel or not math.isfinite(v) or v == 0:
        return digits
    if rel >= 1:
        return 0
    spread = abs(v) * rel / (1 - rel)  # the wider side of [v/(1+r), v/(1−r)]
    return max(1, min(digits, math.floor(math.log10(abs(v))) - math.floor(math.log10(spread)) + 1))


def measured(v: float | None, rel: float | None, digits: int = 3) -> str:
    """A measurement with its relative uncertainty ``rel`` (docs/math.md#digits-a-capture-supports):
    :func:`num` where ``rel`` supports all ``digits``; "≈9e+09" with the digits it supports; where it supports
    none (no upper end), the lower end it proves, as a floor "≥ 5.2e+09"."""
    if v is None or math.isinf(v):
        return num(v, digits)
    shown = supported_digits(v, rel, digits)
    if shown == digits:
        return num(v, digits)
    if shown == 0:
        return floor_num(v / (1 + (rel or 0.0)))
    return f"{APPROX}{v:.{shown}g}"


def to_float(value: object) -> float | None:
    """A JSON float of a report as a float: "inf"/"-inf"/"nan" strings and numbers; None for null or
    anything else (a bool is not a number here)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def rel_uncertainty(agg: object, statistic: str) -> float | None:
    """The relative uncertainty a report's aggregate (a JSON object) gives ``statistic``; None where it gives
    none (older reports, quantities without a floor rule)."""
    rel = agg.get("rel_uncertainty") if isinstance(agg, Mapping) else None
    return to_float(rel.get(statistic)) if isinstance(rel, Mapping) else None
