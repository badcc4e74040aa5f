"""Hostile-input cases: numbers (run by tests/test_hostile.py through tests/hostile_harness.py)."""

from __future__ import annotations

from tests.hostile_harness import Hostile

CASES: list[Hostile] = [
    Hostile("num-layers-garbage", ("spectrum", "--layers", "x,y"), 2, "--layers"),
    Hostile("num-layers-garbage-child", ("spectrum", "--layers", "x,y"), 2, "--layers", memory_gib=6),
]
