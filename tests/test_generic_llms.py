"""Decoder LLMs and modern encoders through the generic adapter, beyond the conformance checks: the mask each
layer declares (causal, sliding window, ModernBERT's ±w band) is the one the model applies, the notes say
where positions enter and what μ(LA) bounds there, and saved CausalLM / task-head folders run through the
CLI as the class their config names. References: the model's own output_attentions (with its attention
weights zeroed, P is uniform over exactly the keys its mask allows), the family's documented position
scheme, and transformers' own loading."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers as tf
from click.testing import Result

from condcli.adapters import adapter_for
from condcli.spectra.entropy import attention_support
from tests.cases_decoders import CASES as DECODERS
from tests.cases_encoders import CASES as ENCODERS
from tests.families import Case

CASES: dict[str, Case] = {**DECODERS["generic"], **ENCODERS["generic"]}

# how each family brings in positions (its documentation), as the notes must say it
ROTARY = "positions enter inside attention (rotary)"
PARTIAL = "positions enter inside attention (rotary, on the first {}% of each head's channels)"
QUARTER = PARTIAL.format(25)
POSITIONS = {
    "stablelm_partial_rotary": QUARTER,
    "gpt_neox_fused": QUARTER,
    "phi2_partial_rotary": PARTIAL.format(50),
    "gptj": "positions enter inside attention (rotary, on the first 4 channels of each head)",
    "bloom_alibi": "positions enter inside attention (ALiBi)",
    "codegen_sharded_qvk": "positions enter inside attention (rotary, on the first 4 channels of each head)",
    "persimmon_per_head": PARTIAL.format(50),
    **dict.fromkeys(
        ("gpt_bigcode_multi_query", "gpt_bigcode_multi_head"), "after the position embedding 'wpe'"
    ),
    "opt": "after the position embedding 'decoder.embed_positions'",
    **dict.fromkeys(
        ("albert_shared", "albert_inner_groups", "albert_two_groups_of_two"),
        "after the position embedding 'embeddings.position_embeddings'",
    ),
    "deberta_v2_disentangled": "positions enter inside attention (disentangled relative position embeddings)",
    "t5_encoder_model": "positions enter inside attention (relative position bias)",
    "t5_full_model_encoder": "positions enter inside attention (relative position bias)",
    "whisper_audio_encoder": "after the position embedding 'embed_positions'",
}
BOUND = "μ(LA) is the bound for the unrotated, unbiased projections"


def _inputs(name: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(2)
    if name.startswith("whisper"):
        return {"input_features": torch.randn(1, 8, 32)}
    return {"input_ids": torch.randint(5, 64, (1, 9))}


@pytest.mark.parametrize("name", list(CASES))
def test_declared_mask_is_the_mask_the_model_applies(name: str) -> None:
    model = CASES[name].build()
    adapter = adapter_for(model)
    with torch.no_grad():  # q = k = v = 0: P is uniform over the keys the mask allows, and only those
        for spec in adapter.layers:
            for p in spec.attn_in.module.parameters():
                p.zero_()
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        att = model(**_inputs(name), output_attentions=True).attentions
    assert len(att) == len(adapter.layers)
    for spec, p in zip(adapter.layers, att, strict=True):
        allowed = (p[0] > 0).sum(-1).double()  # (H, q) keys each query attends to
        n = allowed.shape[-1]
        want = attention_support(n, n, causal=spec.causal, window=spec.window)
        assert torch.equal(allowed, want.expand_as(allowed)), (spec.name, spec.causal, spec.window)


def test_windows_are_found_where_the_family_has_them() -> None:
    """Mistral/Starcoder2/Mixtral keep the window in the config; Gemma2/3 alternate local and global layers;
    ModernBERT's local layer attends ±2 tokens (local_attention = 4)."""
    windows = {name: [spec.window for spec in adapter_for(CASES[name].build()).layers] for name in CASES}
    assert windows["mistral_sliding"] == windows["starcoder2"] == windows["mixtral_moe"] == [3, 3]
    assert windows["gemma2"] == windows["gemma3"] == [3, None]
    assert windows["modernbert_local_global"] == [None, 2, None]
    assert windows["llama"] == windows["qwen2_bias"] == [None, None]


@pytest.mark.parametrize("name", list(CASES))
def test_notes_say_where_positions_enter_and_what_mu_la_bounds(name: str) -> None:
    adapter = adapter_for(CASES[name].build())
    notes = " | ".join(adapter.notes)
    where = POSITIONS.get(name, ROTARY)
    assert where in notes or where in adapter.embedding.description, notes
    inside = "inside attention" in where
    assert (BOUND in notes) == inside, notes
    assert adapter.embedding.after_position_encoding != inside
    heads = adapter.layers[0].heads
    assert f"{heads} heads (" in notes, notes  # the head count and where it was read


def _causal_lm(name: str) -> torch.nn.Module:
    base = CASES[name].build()
    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(base.config).eval()


FOLDERS = {  # name: (the class its config names, its key/value heads)
    "llama_gqa": ("LlamaForCausalLM", 2),
    "gemma3": ("Gemma3ForCausalLM", 2),
    "phi3_fused": ("Phi3ForCausalLM", 2),
    "falcon_multi_query": ("FalconForCausalLM", 1),
    "bloom_alibi": ("BloomForCausalLM", 4),
    "qwen2_moe": ("Qwen2MoeForCausalLM", 2),
}


@pytest.mark.parametrize("name", list(FOLDERS))
def test_a_saved_causal_lm_folder_runs_as_its_config_says(
    name: str, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    cls, kv = FOLDERS[name]
    model = _causal_lm(name)
    assert type(model).__name__ == cls
    model.save_pretrained(tmp_path)
    common = ("--max-samples", "2", "--batch-size", "2", "--json")
    result = cli("spectrum", str(tmp_path), "--layers", "0,-1", *common)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert f"loaded as {cls} (config.json architectures)" in report["notes"]
    assert [layer["kv_heads"] for layer in report["layers"]] == [kv, kv]
    assert all(layer["kappa_probs"] is not None for layer in report["layers"])
    decay = cli("rank-decay", str(tmp_path), *common)
    assert decay.exit_code == 0, decay.output
    assert len(json.loads(decay.stdout)["rank_decay"]["layers"]) == model.config.num_hidden_layers
