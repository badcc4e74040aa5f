"""Smoke tests of `bench/bench_gpu.py` (issue 18 item 2): without CUDA it says in one line that the GPU
figures are not measured and exits 0; its functions run end to end on CPU with tiny sizes (a tiny ViT, a
tiny Llama, two images) so the GPU bench cannot rot while no GPU runs it. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import bench_gpu as bg
from condcli.spectra import strategies

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--model", "test_vit", "--images", "4", "--batch-size", "2", "--cpu-images", "2"]


def test_without_cuda_one_line_and_exit_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bg.main([]) == []
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(bg.NOT_MEASURED)


def test_module_exits_0_without_cuda() -> None:
    """As `make bench` runs it, with every GPU hidden (so also on a GPU machine)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "bench.bench_gpu"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and bg.NOT_MEASURED in done.stdout


def test_every_part_runs_on_cpu_with_tiny_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*TINY, "--strategy-images", "2", "--repeats", "1", "--tiny-llm", "--device", "cpu"]
    verdicts = bg.main(argv)
    out = capsys.readouterr().out
    assert "full plain spectrum (all metrics)" in out and "ratio spectrum / forward on cpu" in out
    assert "2 images, scaled × 4/2" in out and "measured on a subset and scaled" in out
    for name, s in strategies.STRATEGIES.items():
        assert any(line.startswith(name) and s.summary in line for line in out.splitlines()), name
    assert "fastest spectrum:" in out and "pruned maxima over heads: off" in out  # CPU's default
    header = next(line for line in out.splitlines() if line.startswith("strategy"))
    assert "spectrum s" in header and "pruned s" in header
    assert "Llama-style decoder" in out and "torch.bfloat16" in out and "1 prompt of 32 tokens" in out
    assert "full plain spectrum (all layers" in out and "peak GPU MiB" in out
    assert [v.target for v in verdicts] == [bg.TARGET_FORWARD, bg.TARGET_SPEEDUP]
    for v in verdicts:
        assert v.line() in out


def test_llm_only_runs_the_decoder_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert bg.main(["--device", "cpu", "--llm-only", "--tiny-llm", "--repeats", "1"]) == []
    out = capsys.readouterr().out
    assert "Llama-style decoder" in out and bg.MODEL not in out and "linear-algebra strategies" not in out


def test_the_llm_is_about_a_billion_parameters() -> None:
    """The default decoder's shape (TinyLlama-1.1B's) counted from the formula of a LlamaModel."""
    s = bg.LLM
    per_layer = (
        2 * s.hidden * s.hidden + 2 * s.hidden * (s.hidden // s.heads) * s.kv_heads + 3 * s.hidden * s.mlp
    )
    total = s.vocab * s.hidden + s.layers * (per_layer + 2 * s.hidden) + s.hidden
    assert 0.9e9 < total < 1.2e9 and s.tokens == 2048
