"""How condcli writes a number for a reader, in one place: the CLI tables, the HTML report and the figures'
legends round the same way (three significant digits; a floor "≥ x", two digits; inf as "inf")."""

from __future__ import annotations

import math

WARN = "⚠"  # marks a value of which some samples were below the capture dtype's resolution (SPEC §2)


def num(v: float | None, digits: int = 3) -> str:
    """``digits`` significant digits (three, as the tables print them); inf stays "inf"; None (not
    observable) is a dash."""
    if v is None:
        return "—"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def floor_num(v: float) -> str:
    """A floor: "≥ 3.1e+04" — two significant digits, the true value is at least this (SPEC §2)."""
    return "≥ inf" if math.isinf(v) else f"≥ {v:.2g}"
