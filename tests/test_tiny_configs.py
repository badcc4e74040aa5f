"""The breadth sweep's tiny configs (bench/tiny_configs.py) and its retry at a bigger size
(bench/sweep_architectures.py): a model whose own code fails on a tiny config is built again wider, so that
the sweep's table reports the model, not the sweep's config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoConfig

from bench.sweep_architectures import OWN_FAILURE
from bench.tiny_configs import SCALARS, TIER_NOTES, WIDE_HEADS, build_tier, shrink


def test_a_rotary_width_is_cut_to_the_head() -> None:
    config = AutoConfig.for_model("codegen")
    assert config.rotary_dim == 64
    shrink(config, SCALARS)
    assert config.rotary_dim == config.n_embd // config.n_head == 16


@pytest.mark.parametrize("sizes", [SCALARS, WIDE_HEADS])
def test_layoutlmv3s_box_widths_add_up_to_its_width(sizes: dict[str, int]) -> None:
    config = AutoConfig.for_model("layoutlmv3")
    shrink(config, sizes)
    assert 4 * config.coordinate_size + 2 * config.shape_size == config.hidden_size == sizes["hidden_size"]


def test_a_later_tier_is_built_when_asked(tmp_path: Path) -> None:
    name, tier = build_tier("codegen", tmp_path / "m", first=1)
    assert (name, tier) == ("CodeGenModel" + TIER_NOTES[1], 1)
    config = AutoConfig.from_pretrained(tmp_path / "m")
    assert config.n_embd // config.n_head == 128 and config.n_layer == 2


def test_the_retry_pattern_takes_the_models_own_failures_only() -> None:
    own = (
        "error: [inputs] LiltModel rejected the inputs condcli gave it (input_ids (2, 64)): RuntimeError: "
        "mat1 and mat2 shapes cannot be multiplied (128x60 and 64x16)"
    )
    assert OWN_FAILURE.search(own)
    needs = "error: [inputs] BrosModel rejected the inputs condcli gave it: ValueError: give bbox"
    assert not OWN_FAILURE.search(needs)
    assert not OWN_FAILURE.search("error: [qkv-unreadable] RuntimeError in a sentence")


def test_a_model_that_fails_tiny_is_run_again_wider(tmp_path: Path) -> None:
    """LiLT's layout channels (6 boxes of width // 6) do not add up at 64 nor at 256 wide: at its own width
    (768, 2 layers) it runs, and the sweep reports that run, with the tiny tries kept. The sweep runs as a
    user runs it, in a process of its own (it forks: a parent whose OpenMP threads have run cannot)."""
    out = tmp_path / "breadth.json"
    argv = ["--only", "lilt", "--jobs", "1", "--timeout", "300", "--out-json", str(out)]
    script = Path(__file__).resolve().parent.parent / "bench" / "sweep_architectures.py"
    done = subprocess.run(
        [sys.executable, str(script), *argv, "--out-md", str(tmp_path / "breadth.md")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = json.loads(out.read_text())
    assert result["class"] == "verified", result
    assert result["built_as"] == "LiltModel" + TIER_NOTES[2]
    assert len(result["tries"]) == 2 and all("mat1 and mat2" in t for t in result["tries"])
