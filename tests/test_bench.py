"""Smoke test of `bench/bench_spectrum.py` on a tiny random ViT: every code path runs and the printed tables
carry the ratio rows and the target verdicts. No timing is asserted (the numbers are machine noise here)."""

from __future__ import annotations

import math

import pytest

from bench import bench_spectrum as bs

TINY = "test_vit"  # timm's own test model: 6 blocks, 2 heads, 101 tokens


def test_bench_prints_every_part_with_ratios(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # part 3 in-process here (a fresh interpreter per size is test_memory_child_subprocess's job)
    monkeypatch.setattr(
        bs, "run_child", lambda cfg, n, device: bs.memory_child(cfg.model, n, cfg.batch_size, "cpu")
    )
    argv = ["--model", TINY, "--samples", "2", "--batch-size", "1", "--memory-samples", "1", "2"]
    verdicts = bs.main([*argv, "--repeats", "1", "--device", "cpu", "--threads", "1"])
    out = capsys.readouterr().out

    for label in bs.LABELS.values():
        assert label in out
    assert "(c) per forward pass: (c) / 2" in out
    assert "(g) against the full default spectrum (c)" in out
    for ratio in ("x (a)", "x (f)", "x (c)"):
        assert ratio in out
    assert "of which P (softmax probabilities), by SVD" in out
    assert "peak RSS" in out and "1 vs 2 images" in out

    assert [v.target for v in verdicts] == [1.3, 2.0, 1.3, 1.5, 1.2]
    for v in verdicts:
        assert v.line() in out and v.line().endswith(("PASS", "MISS"))


def test_plain_only_times_the_forward_and_the_plain_spectrum(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", TINY, "--samples", "2", "--batch-size", "1", "--repeats", "1", "--device", "cpu"]
    verdicts = bs.main([*argv, "--threads", "1", "--plain-only"])
    out = capsys.readouterr().out
    assert bs.LABELS["a"] in out and bs.LABELS["d"] in out and bs.LABELS["c"] not in out
    assert bs.LABEL_MKL in out  # MKL threads inside each decomposition, for comparison (x86 wheels: MKL)
    assert bs.LABEL_PRUNED in out  # the maxima over heads pruned, off by default on CPU
    assert [v.target for v in verdicts] == [bs.TARGET_PLAIN] and "issue 18" in verdicts[0].what
    assert verdicts[0].line() in out


def test_early_stop_times_each_run_stopped_and_whole(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", TINY, "--samples", "2", "--batch-size", "1", "--repeats", "1", "--device", "cpu"]
    assert bs.main([*argv, "--threads", "1", "--early-stop"]) == []  # printed only, no target
    out = capsys.readouterr().out
    for run in ("spectrum --layers 0 --no-conditioned", "(f) spectrum --layers none", "(g) sweep-lambda"):
        stopped = [ln for ln in out.splitlines() if ln.startswith(run) and "whole model" not in ln]
        whole = [ln for ln in out.splitlines() if ln.startswith(run) and "whole model" in ln]
        assert len(stopped) == len(whole) == 1, out
        assert stopped[0].split()[-1].endswith("x") and whole[0].split()[-1].endswith("x")


def test_memory_child_subprocess() -> None:
    cfg = bs.Config(model=TINY, batch_size=1, threads=1)
    got = bs.run_child(cfg, 1, bs.devices("cpu")[0])
    assert {"rss_peak", "rss_after_load", "seconds"} <= set(got)  # read, not judged: machine noise here


def test_rank_decay_bench_prints_every_contender_and_both_verdicts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import bench_rank_decay as br

    argv = ["--model", TINY, "--samples", "2", "--batch-size", "1", "--repeats", "1", "--device", "cpu"]
    verdicts = br.main([*argv, "--threads", "1"])
    out = capsys.readouterr().out
    for label in br.LABELS.values():
        assert label in out
    assert "x (a)" in out and "x (b)" in out and "24 P" in out  # 6 blocks × 2 heads × 2 images
    assert [v.target for v in verdicts] == [1.0, 1.0]
    for v in verdicts:
        assert v.line() in out


def test_long_sequence_bench_prints_every_contender_and_the_depth_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import bench_long_sequence as bl

    verdicts = bl.main(["--tiny", "--tokens", "32", "--threads", "1"])
    out = capsys.readouterr().out
    for label in bl.LABELS.values():
        assert label in out
    assert "LlamaModel via the generic adapter" in out and "2 layers, 4 heads / 2 KV" in out
    assert "1 prompt of 32 tokens" in out and "one layer's P: 4 × 32²" in out
    assert "analysis per layer" in out
    if not bl.can_reset_peak():  # a kernel without /proc/self/clear_refs: no memory column, no verdict
        assert verdicts == [] and "peak memory: n/a" in out
        return
    assert "memory of depth: (e) − (d)" in out and [v.target for v in verdicts] == [1.0]
    assert verdicts[0].line() in out


def test_a_reading_with_nothing_to_divide_prints_not_measurable() -> None:
    """A clock or an RSS delta of 0 on a loaded machine gives no ratio: the bench says so, no crash."""
    assert math.isnan(bs.ratio(1.0, 0.0)) and math.isnan(bs.ratio(1.0, -3.0)) and bs.ratio(3.0, 2.0) == 1.5
    line = bs.Verdict("x vs y", bs.ratio(1.0, 0.0), 1.5).line()
    assert line == "x vs y: n/a (not measurable in this run) ≤ 1.5x  MISS"


def test_embedding_table_bench_prints_both_paths_and_their_memory_ratio(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import bench_embedding_table as be

    monkeypatch.setattr(be, "run_child", lambda rows, dim, method: be.child(rows, dim, method))
    verdicts = be.main(["--rows", "300", "--dim", "16"])
    out = capsys.readouterr().out
    assert "random bf16 300 × 16" in out
    for label in be.LABELS.values():
        assert label in out
    assert [v.target for v in verdicts] == [be.TARGET, be.TARGET]
    for v in verdicts:
        assert v.line() in out


def test_weights_bench_prints_every_contender_and_the_ratios(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench import bench_weights as bw

    monkeypatch.setattr(bw, "run_child", lambda what, folder: bw.child(what, folder))
    got = bw.main(["--tiny"])
    out = capsys.readouterr().out
    assert set(got) == set(bw.LABELS) and "random Llama" in out
    for label in bw.LABELS.values():
        assert label in out
    assert "(a) vs (b): peak RSS" in out and "(a) vs (c): peak RSS" in out
