"""Conformance cases (see tests/families.py for the contract and tests/conformance_cases.py for the merge)."""

from __future__ import annotations

from tests.families import Case

CASES: dict[str, dict[str, Case]] = {}
