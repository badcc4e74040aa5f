"""`bench_long_sequence --mix` (bench/long_mix.py): the tempered random-init Llama really has heads of every
kind (a sink, broad heads that are not floors, floors), and the side-by-side run prints every contender,
the share of heads decided in O(n²) and a verdict per target. No timing is asserted."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bench import bench_long_sequence as bl
from bench import long_mix, long_mix_process
from condcli.capture import capture
from condcli.spectra.core import summarize


def test_tempered_llama_has_sinks_broad_heads_and_floors() -> None:
    shape = replace(bl.TINY, tokens=48)
    with tempfile.TemporaryDirectory() as folder:
        loaded, what = long_mix.mixed_model(shape, Path(folder), tempered=True)
    assert "random-init Llama" in what
    probs: list[torch.Tensor] = []
    batch = long_mix.mixed_prompt(loaded, shape.tokens)
    capture(loaded.adapter, batch, layers=None, sink=lambda layer: probs.append(layer.probs[0, 0].clone()))
    for p in probs:  # (H, n, n) per layer
        sink = p[:, 4:, 0].mean(-1)
        assert float(sink[0]) > 0.9 and bool((sink[1:] < 0.5).all())  # head 0 sinks, the others do not
    below = summarize(torch.cat(probs), torch.float32, method="svd", floors=True).below_precision
    assert bool(below.any()) and not bool(below.all())


def test_side_by_side_prints_every_contender_and_the_share(capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = bl.main(["--tiny", "--mix", "--tempered", "--lengths", "100", "--threads", "1"])
    out = capsys.readouterr().out
    for label in long_mix.LABELS.values():
        assert label in out
    assert "heads' κ(P) decided in O(n²):" in out and "of 16" in out  # 2 layers × 4 heads, (e) and (g)
    assert verdicts[0].what == "100 tokens: (e) / (a)"
    for v in verdicts:
        assert v.line() in out


def test_whole_process_contenders_time_the_named_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    """--whole-process saves the tempered Llama as a folder with a tokenizer, and each contender reads the
    same token ids from the prompt file: condcli reports analysing exactly that many tokens (the bench
    raises otherwise), and the forward scripts run to the end."""
    shape = replace(bl.TINY, tokens=40)
    with tempfile.TemporaryDirectory() as work:
        verdicts = long_mix_process.side_by_side(shape, [40], 1, Path(work))
        words = (Path(work) / "prompt40.txt").read_text().split()
    assert [int(w[1:]) for w in words] == long_mix.random_ids(shape.vocab, 40)
    out = capsys.readouterr().out
    for label in long_mix_process.LABELS.values():
        assert label in out
    assert "(e) ÷ (o), both ending without the teardown:" in out  # how the process ends, said apart
    assert [v.what for v in verdicts] == ["40 tokens, whole processes: (e) / (a)"]
