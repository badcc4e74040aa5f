"""The breadth sweep's tiny configs (bench/tiny_configs.py) and its retry at a bigger size
(bench/sweep_architectures.py): a model whose own code fails on a tiny config is built again wider, so that
the sweep's table reports the model, not the sweep's config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoConfig

from bench.sweep_architectures import OWN_FAILURE
from bench.tiny_configs import SCALARS, TIER_NOTES, WIDE_HEADS, build_tier, sections, shrink


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


def sweep_one(name: str, tmp_path: Path) -> dict[str, Any]:
    """One case of the sweep, run as a user runs it, in a process of its own (it forks: a parent whose
    OpenMP threads have run cannot): its result."""
    out = tmp_path / "breadth.json"
    argv = ["--only", name, "--jobs", "1", "--timeout", "300", "--out-json", str(out)]
    script = Path(__file__).resolve().parent.parent / "bench" / "sweep_architectures.py"
    done = subprocess.run(
        [sys.executable, str(script), *argv, "--out-md", str(tmp_path / "breadth.md")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = json.loads(out.read_text())
    assert isinstance(result, dict)
    return result


def test_a_model_that_fails_tiny_is_run_again_wider(tmp_path: Path) -> None:
    """LiLT's layout channels (6 boxes of width // 6) do not add up at 64 nor at 256 wide: at its own width
    (768, 2 layers) it runs, and the sweep reports that run, with the tiny tries kept. The sweep runs as a
    user runs it (:func:`sweep_one`)."""
    result = sweep_one("lilt", tmp_path)
    assert result["class"] == "verified", result
    assert result["built_as"] == "LiltModel" + TIER_NOTES[2]
    assert len(result["tries"]) == 2 and all("mat1 and mat2" in t for t in result["tries"])


def test_m_ropes_sections_are_scaled_to_their_sum() -> None:
    assert sections([8, 12, 12], 8) == [2, 3, 3]
    assert sections([16, 24, 24], 64) == [16, 24, 24]
    assert sections([22, 22, 20], 4)[:2] == [1, 1]  # ERNIE 4.5 VL stacks h and w: they stay equal
    assert all(
        sum(sections(s, n)) == n and min(sections(s, n)) >= 0
        for s in ([8, 12, 12], [24, 20, 20])
        for n in range(1, 70)
    )


@pytest.mark.parametrize("model_type", ["glm4v_text", "glm_image_text"])
def test_m_rope_sections_cover_the_rotary_width(tmp_path: Path, model_type: str) -> None:
    """GLM-4.1V's default sections ([8, 12, 12]: 32 frequencies) assume a head of 128 rotated on its half,
    a partial_rotary_factor its default config does not set: no head width runs them (split_with_sizes
    expects split_sizes to sum exactly to 64). The tiny config carries sections as wide as its rotary half,
    and runs."""
    import torch
    from transformers import AutoModel

    _, tier = build_tier(model_type, tmp_path / "m")
    assert tier == 0
    config = AutoConfig.from_pretrained(tmp_path / "m")
    rope = config.rope_parameters
    head = config.hidden_size // config.num_attention_heads
    assert sum(rope["mrope_section"]) == int(head * rope.get("partial_rotary_factor", 1.0)) // 2 == 8
    model = AutoModel.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.arange(8).view(1, 8), attention_mask=torch.ones(1, 8, dtype=torch.long))
    assert out.last_hidden_state.shape == (1, 8, config.hidden_size)


@pytest.mark.parametrize("sizes", [SCALARS, WIDE_HEADS])
def test_latent_attention_keeps_its_heads_and_rotary_width(sizes: dict[str, int]) -> None:
    """Kimi K2.5's text model (DeepSeek-V3's MLA) makes a key and a value per query head, and its rotary
    embedding is head_dim wide, which DeepseekV3Config sets to qk_rope_head_dim: cut one by one, 2 key heads
    for 4 query heads (eager attention repeats them to 8) and a head_dim of 16 for a rope width of 8 did not
    run at any size."""
    import torch
    from transformers import DeepseekV3Model

    config = AutoConfig.for_model("kimi_k25")
    shrink(config, sizes)
    text = config.text_config
    assert text.num_key_value_heads == text.num_attention_heads == sizes["num_attention_heads"]
    assert text.head_dim == text.qk_rope_head_dim == sizes["qk_rope_head_dim"]
    assert text.qk_head_dim == text.qk_nope_head_dim + text.qk_rope_head_dim
    if sizes is SCALARS:
        torch.manual_seed(0)
        model = DeepseekV3Model._from_config(text, attn_implementation="eager").eval()
        with torch.no_grad():
            out = model(input_ids=torch.arange(8).view(1, 8))
        assert out.last_hidden_state.shape == (1, 8, text.hidden_size)


def test_edgetams_backbone_is_the_one_its_config_names() -> None:
    """EdgeTAM's config names its timm backbone under a misspelt key ("archirecture"), and timm_wrapper builds
    its default (resnet50), whose channels and strides EdgeTAM's neck does not take."""
    config = AutoConfig.for_model("edgetam")
    shrink(config, SCALARS)
    assert config.vision_config.backbone_config.architecture == "repvit_m1"


def test_a_token_id_a_default_config_lacks_is_set() -> None:
    """Qwen3-Omni's thinker reads vision_start_token_id, which only its talker's config declares."""
    config = AutoConfig.for_model("qwen3_omni_moe_thinker")
    assert getattr(config, "vision_start_token_id", None) is None
    shrink(config, SCALARS)
    assert config.vision_start_token_id == 151652


def test_glm4v_text_is_analysed_at_the_tiny_size(tmp_path: Path) -> None:
    """End to end, as the sweep runs it (its own process): GLM-4.1V's text model runs at 64 wide, at the
    first try."""
    result = sweep_one("glm4v_text", tmp_path)
    assert result["class"] == "verified", result
    assert result["built_as"] == "Glm4vTextModel" and "tries" not in result
