"""Printed numbers compared at the precision they claim (docs/math.md#digits-a-capture-supports): digits
below a value's uncertainty, which another machine's float32 kernels may change, never fail a comparison."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from condcli.numbers import APPROX, WARN


def claimed(cell: str) -> tuple[float, float] | None:
    """The interval a printed number claims, or None for text: its value ± one unit of its last digit
    ("151": [150, 152]; "≈9e+09": [8e9, 1e10]); a floor "≥ 1.7e+07" claims [1.6e7, ∞). ⚠ is set aside:
    which samples fall below the floor may differ between machines, the interval is what is compared."""
    text = cell.replace(WARN, "").strip()
    floor = text.startswith("≥ ")
    text = text.removeprefix("≥ ").removeprefix(APPROX)
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return (math.inf, math.inf)
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    ulp = float(Decimal(1).scaleb(exponent))
    return (float(value) - ulp, math.inf if floor else float(value) + ulp)


def assert_same_at_claimed_precision(readme: str, printed: str) -> None:
    """The README's block and the printed one: the same lines and cells, each number within the precision
    both claim (their intervals meet), so that digits below a value's uncertainty, which another machine's
    float32 kernels may change (docs/math.md), never fail the comparison."""
    old, new = readme.splitlines(), printed.splitlines()
    assert len(old) == len(new), printed
    for a, b in zip(old, new, strict=True):
        cells_a, cells_b = re.split(r"[│┃]", a), re.split(r"[│┃]", b)
        assert len(cells_a) == len(cells_b), (a, b)
        for x, y in zip(cells_a, cells_b, strict=True):
            assert same_at_claimed_precision(x, y), f"{x.strip()!r} vs {y.strip()!r} in {b}"


def same_at_claimed_precision(a: str, b: str) -> bool:
    """Whether two printed values claim intervals that meet (text that is no number: equal text)."""
    ia, ib = claimed(a), claimed(b)
    if ia is None or ib is None:
        return a.strip() == b.strip()
    return ia[0] <= ib[1] and ib[0] <= ia[1]
