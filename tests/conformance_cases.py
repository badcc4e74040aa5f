"""Every conformance case: the paper's families (tests/families.py) merged with the breadth cases.

Each ``tests/cases_*.py`` module exports ``CASES: dict[str, dict[str, Case]]`` (family → variant → case); a
family's variants from several modules are merged, a variant name used twice is an error.
"""

from __future__ import annotations

import tests.cases_av as cases_av
import tests.cases_hybrid as cases_hybrid
from tests import cases_decoders, cases_encoders, cases_generic_toys, cases_timm_functional, cases_vision
from tests.families import CASES as BASE
from tests.families import Case

MODULES = (cases_generic_toys, cases_timm_functional, cases_vision, cases_decoders, cases_encoders)
MODULES += (cases_hybrid,)  # attention or not, P on request, modules re-created in forward (issue 29)
MODULES += (cases_av,)  # video and audio inputs (issue 29, point 6)


def merged() -> dict[str, dict[str, Case]]:
    out: dict[str, dict[str, Case]] = {family: dict(variants) for family, variants in BASE.items()}
    for module in MODULES:
        for family, variants in module.CASES.items():
            into = out.setdefault(family, {})
            twice = set(into) & set(variants)
            if twice:
                raise ValueError(f"{module.__name__}: variant(s) {sorted(twice)} of {family} defined twice")
            into.update(variants)
    return out


CASES = merged()
