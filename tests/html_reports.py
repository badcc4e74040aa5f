"""Real reports for the HTML report tests (made once per session by the in-process CLI), and reading a
report's JSON floats independently of condcli.

The fixtures ``spectrum``, ``sweep`` and ``rank`` (in conftest.py) serve them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

LAM = 10.0
VIT = "vit-plain"
SAMPLES = "4"


def jf(value: Any) -> float:
    """A JSON float of a report ("inf" strings included) as a Python float."""
    return float(value)


def spectrum_args() -> tuple[str, ...]:
    return ("spectrum", VIT, "--heads", "--max-samples", SAMPLES, "--lambda", f"{LAM:g}")


def sweep_args() -> tuple[str, ...]:
    return ("sweep-lambda", VIT, "--range", "1", "20", "--layers", "all", "--max-samples", SAMPLES)


def rank_args() -> tuple[str, ...]:
    return ("rank-decay", VIT, "--heads", "--conditioned", f"{LAM:g}", "--max-samples", SAMPLES)


def sig3(v: float) -> str:
    """How the CLI tables round a number: three significant digits, inf as "inf"."""
    return ("inf" if v > 0 else "-inf") if math.isinf(v) else f"{v:.3g}"


_MADE: dict[tuple[str, ...], dict[str, Any]] = {}


def made(cli_json: Callable[..., dict[str, Any]], args: tuple[str, ...]) -> dict[str, Any]:
    """The report of ``condcli *args --json``, run once per test session (shared by the HTML test files;
    tests copy a report before changing it)."""
    if args not in _MADE:
        _MADE[args] = cli_json(*args)
    return _MADE[args]
