"""Smoke test of `bench/bench_monitor.py` on a 1-block BERT for a few steps: both runs happen side by side and
the ratio and its verdict are printed. No timing is asserted (the numbers are machine noise here)."""

from __future__ import annotations

import pytest

from bench import bench_monitor as bm


def test_bench_prints_both_runs_and_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--steps", "3", "--every", "2", "--device", "cpu", "--hidden", "32", "--layers", "1"]
    verdicts = bm.main([*argv, "--batch-size", "2", "--warmup", "0"])
    out = capsys.readouterr().out
    assert "(a) plain training step" in out and "(b) with ConditioningCallback(every 2)" in out
    assert [v.target for v in verdicts] == [1.05, 1.05]
    assert all(v.line() in out for v in verdicts)
    assert "condcli/" not in out  # the Trainer's printed logs are off: the table stays readable
