"""Hostile-input cases: loading (run by tests/test_hostile.py through tests/hostile_harness.py)."""

from __future__ import annotations

from tests.hostile_harness import Hostile

CASES: list[Hostile] = []
