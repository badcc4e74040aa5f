"""Reading a report's JSON as the readers above this layer do (the page, the figures, the gate): an older or
partial report's missing or null parts read as empty, never as a crash. :mod:`condcli.html` and
:mod:`condcli.figures` both read through these."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from condcli.numbers import to_float

Report = Mapping[str, Any]


def as_map(value: object) -> Mapping[str, Any]:
    """``value`` where it is a JSON object, else {} (an older report may lack it or hold null)."""
    return value if isinstance(value, Mapping) else {}


def as_maps(value: object) -> list[Mapping[str, Any]]:
    """The JSON objects of a list (an absent or null list is empty)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def lam_text(report: Report) -> str:
    """The report's λ as the CLI prints it ("10"), or "λ" where the settings lack it."""
    lam = as_map(report.get("settings")).get("lambda")
    return f"{lam:g}" if isinstance(lam, (int, float)) and not isinstance(lam, bool) else "λ"


def floats(values: object) -> list[float]:
    """A JSON list of floats; null and non-numbers become NaN; anything not a list gives []."""
    if not isinstance(values, list):
        return []
    out = []
    for v in values:
        f = to_float(v)
        out.append(math.nan if f is None else f)
    return out


def stat(agg: object, statistic: str = "median") -> float | None:
    """One statistic of an aggregate dict, None where the aggregate or the statistic is missing."""
    return to_float(agg.get(statistic)) if isinstance(agg, Mapping) else None


def counted(count: object, kind: object) -> str:
    """How many inputs a report ran on, as a person writes it: "1 image", "16 images", "1 text sample",
    "2 samples" (``kind`` the JSON's inputs.kind: no "images samples", no "1 images")."""
    noun = "image" if kind == "images" else f"{kind} sample" if kind else "sample"
    return f"{count} {noun}{'' if count == 1 else 's'}"
