"""Tiny random configs of transformers model types, for the breadth sweep (bench/sweep_architectures.py) and
the tests that build the models it found.

A model type is built at the first of three sizes (:data:`TIERS`) that builds and, in the sweep, runs:

1. :data:`SCALARS`: 64 wide, 4 heads of 16, 2 layers;
2. :data:`WIDE_HEADS`: the same depth with heads of 128 (2 heads, 256 wide), for models whose code assumes a
   head as wide as their real one in a way :func:`fit` and :func:`fit_sections` do not mend (EdgeTAM's and
   SAM 2's FPN width against their tiny mask decoder);
3. :data:`DEPTH_ONLY`: only the depths cut, every width as the config has it (stage widths that must agree,
   as in SAM 2's Hiera, or LiLT's layout channels).

:func:`fit` keeps the widths a config ties to each other in agreement at every size, and :data:`OVERRIDES`
sets what a default config lacks that its model reads; :func:`fit_sections` makes a built model's M-RoPE
sections cover its rotary width.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# tiny sizes: every attribute a config has among these is set so (lists: each entry)
SCALARS = {
    "hidden_size": 64,
    "d_model": 64,
    "n_embd": 64,
    "embed_dim": 64,
    "dim": 64,
    "num_hidden_layers": 2,
    "n_layer": 2,
    "n_layers": 2,
    "num_layers": 2,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_attention_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "ffn_dim": 128,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "n_inner": 128,
    "d_ff": 128,
    "d_kv": 16,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "output_channels": 64,  # SAM's neck, to meet its tiny prompt encoder and mask decoder
    "num_pos_feats": 32,  # SAM's positional features: half its prompt encoder's width
    "frames_per_clip": 8,  # V-JEPA 2's clips: 64 frames of 256² are 8,192 tokens
    "crop_size": 64,
}
LIST_DEPTHS = ("depths", "num_layers_per_stage", "layer_depths", "block_sizes", "block_repeats")
# the last try, where the tiny widths (and heads of 128) do not build or run: only the depths (the widths
# as the config has them)
DEPTH_ONLY = {
    k: v
    for k, v in SCALARS.items()
    if "layers" in k or k in ("n_layer", "num_experts", "num_local_experts", "n_routed_experts")
}


# heads as wide as a real model's (128): the second try, where a model's code assumes that width
# (TIERS: SCALARS, WIDE_HEADS, DEPTH_ONLY in that order)
WIDE_HEADS = {
    **SCALARS,
    "hidden_size": 256,
    "d_model": 256,
    "n_embd": 256,
    "embed_dim": 256,
    "dim": 256,
    "num_attention_heads": 2,
    "n_head": 2,
    "n_heads": 2,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 128,
    "d_kv": 128,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 64,
    "v_head_dim": 128,
}
TIERS = (SCALARS, WIDE_HEADS, DEPTH_ONLY)
TIER_NOTES = ("", " (heads of 128)", " (default widths)")
MAX_PARAMETERS = 150_000_000


# what a default config lacks that its model reads, by model type (each with where and why)
OVERRIDES: dict[str, dict[str, Any]] = {
    # Qwen3OmniMoeThinkerModel's get_rope_index (transformers models/qwen3_omni_moe/
    # modeling_qwen3_omni_moe.py, Qwen3OmniMoePreTrainedModelForConditionalGeneration.get_rope_index) reads
    # config.vision_start_token_id on every forward given input_ids and an attention mask, and
    # Qwen3OmniMoeThinkerConfig does not declare it (only the talker's config does): a transformers bug; the
    # released checkpoints' thinker_config carry it (<|vision_start|>, 151652, as Qwen2.5-Omni's thinker
    # declares).
    "qwen3_omni_moe_thinker": {"vision_start_token_id": 151652},
}


def _ties(config: Any) -> set[str]:
    """The ties of a Multi-head Latent Attention config (DeepSeek-V2/V3, Kimi K2.5's text model: one with a
    ``kv_lora_rank``) that hold before :func:`shrink` sets its sizes one by one, for :func:`fit` to keep:
    ``kv_heads``, its key and value heads are its query heads (``kv_b_proj`` makes one of each per query
    head, and eager attention repeats the keys num_attention_heads // num_key_value_heads times more);
    ``rope_head``, its ``head_dim`` is its rotary width ``qk_rope_head_dim`` (DeepseekV3Config sets it so,
    and the rotary embedding reads ``head_dim``)."""
    if not isinstance(getattr(config, "kv_lora_rank", None), int):
        return set()
    held = set()
    heads, kv_heads = (
        getattr(config, "num_attention_heads", None),
        getattr(config, "num_key_value_heads", None),
    )
    if isinstance(heads, int) and heads == kv_heads:
        held.add("kv_heads")
    rope = getattr(config, "qk_rope_head_dim", None)
    if isinstance(rope, int) and getattr(config, "head_dim", None) == rope:
        held.add("rope_head")
    return held


def fit(config: Any, ties: set[str] | frozenset[str] = frozenset()) -> None:
    """Widths that ``config`` ties to each other made to agree again after :func:`shrink` (in place):
    a rotary width no wider than a head (CodeGen, GPT-J), LayoutLMv3's 4·coordinate + 2·shape = width, the
    ``ties`` of a latent-attention config (:func:`_ties`), EdgeTAM's backbone as its config names it, and
    :data:`OVERRIDES`."""
    for key, value in OVERRIDES.get(getattr(config, "model_type", ""), {}).items():
        if getattr(config, key, None) is None:
            setattr(config, key, value)
    # EdgeTamVisionConfig asks timm_wrapper for its backbone under a misspelt key, "archirecture": "repvit_m1"
    # (transformers models/edgetam/configuration_edgetam.py, sub_configs_defaults), so the wrapper builds its
    # default, resnet50, whose channels (64…1024) and strides (2…16) are not the backbone_channel_list
    # ([384, 192, 96, 48]) nor the feature sizes the neck expects: the architecture the key meant
    misspelt = getattr(config, "archirecture", None)
    if getattr(config, "model_type", None) == "timm_wrapper" and isinstance(misspelt, str):
        config.architecture = misspelt
    if "kv_heads" in ties:
        config.num_key_value_heads = config.num_attention_heads
    if "rope_head" in ties:
        config.head_dim = config.qk_rope_head_dim
    if ties and isinstance(getattr(config, "qk_head_dim", None), int):
        config.qk_head_dim = config.qk_nope_head_dim + config.qk_rope_head_dim
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None)
    width = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    if isinstance(heads, int) and isinstance(width, int) and heads > 0:
        head = getattr(config, "head_dim", None) or width // heads
        rotary = getattr(config, "rotary_dim", None)
        if isinstance(rotary, int) and rotary > head:
            config.rotary_dim = head
    coordinate, shape = getattr(config, "coordinate_size", None), getattr(config, "shape_size", None)
    if isinstance(width, int) and isinstance(coordinate, int) and isinstance(shape, int):
        if 4 * coordinate + 2 * shape != width and width % 8 == 0:
            config.shape_size = width // 8
            config.coordinate_size = (width - 2 * config.shape_size) // 4


def shrink(config: Any, sizes: dict[str, int], depth: int = 0) -> None:
    """Set ``sizes`` on ``config`` and on every sub-config it holds (in place)."""
    from transformers import PretrainedConfig

    # widths per stage (Swin's num_heads list): the widths stay as the config has them, only depths shrink
    staged = any(
        isinstance(getattr(config, k, None), list | tuple) for k in ("num_heads", "num_attention_heads")
    )
    ties = _ties(config)
    for key, value in sizes.items():
        if staged and key not in DEPTH_ONLY:
            continue
        current = getattr(config, key, None)
        if isinstance(current, int) and not isinstance(current, bool) and current > value:
            try:
                setattr(config, key, value)
            except Exception:  # a read-only property
                pass
    for key in LIST_DEPTHS:
        current = getattr(config, key, None)
        if isinstance(current, list | tuple) and all(isinstance(v, int) for v in current):
            try:
                setattr(config, key, [min(1, v) if v else v for v in current])
            except Exception:
                pass
    fit(config, ties)
    if depth > 2:
        return
    for key in list(vars(config)):
        sub = getattr(config, key, None)
        if isinstance(sub, PretrainedConfig):
            shrink(sub, sizes, depth + 1)


def sections(default: list[int], total: int) -> list[int]:
    """``default`` (M-RoPE sections, t/h/w) scaled to add up to ``total``, each rounded and the rest on the
    last (ERNIE 4.5 VL's equal h and w sections stay equal)."""
    whole = sum(default)
    scaled = [int(s * total / whole + 0.5) for s in default]
    scaled[-1] += total - sum(scaled)
    if scaled[-1] < 0:  # rounding up took more than the last had: from the first instead
        scaled[0] += scaled[-1]
        scaled[-1] = 0
    return scaled


def fit_sections(model: Any) -> bool:
    """The M-RoPE sections of ``model``'s rotary embeddings made to cover their rotary width (in place, on
    the config each reads, which is the config that ``model`` was built from); whether any changed.

    A rotary embedding with M-RoPE splits its ``inv_freq`` (rotary width / 2 frequencies) into time, height
    and width sections, ``rope_parameters["mrope_section"]``, or its code's default where the config has none:
    GLM-4.1V's [8, 12, 12] assumes a head of 128 with ``partial_rotary_factor`` 0.5, which Glm4vTextConfig
    (and GlmImageTextConfig) do not set, so their own default config does not run (``split_with_sizes expects
    split_sizes to sum exactly to 64``), nor does any config whose head is not 128 wide (Qwen2-VL's
    [16, 24, 24]). The sections are scaled to add up to ``inv_freq``'s length. On text (all condcli gives such
    a model), the three rows of positions are the same, so how the sections divide the width changes
    nothing."""
    changed = False
    for module in model.modules():
        default, inv_freq = getattr(module, "mrope_section", None), getattr(module, "inv_freq", None)
        rope = getattr(getattr(module, "config", None), "rope_parameters", None)
        if not (isinstance(default, list | tuple) and default and all(isinstance(s, int) for s in default)):
            continue
        if inv_freq is None or inv_freq.dim() != 1 or not isinstance(rope, dict):
            continue
        width = int(inv_freq.shape[0])
        if sum(default) != width:
            rope["mrope_section"] = sections(list(default), width)
            changed = True
    return changed


def build_tier(model_type: str, folder: Path, first: int = 0) -> tuple[str, int]:
    """Save a tiny random model of ``model_type`` into ``folder``, at the first of :data:`TIERS` from
    ``first`` on that builds; its base class name and that tier."""
    import torch
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    names = MODEL_MAPPING_NAMES[model_type]
    cls = getattr(transformers, names[0] if isinstance(names, list | tuple) else names)
    failed: BaseException | None = None
    for tier in range(first, len(TIERS)):
        try:
            torch.manual_seed(0)
            config = AutoConfig.for_model(model_type)
            shrink(config, TIERS[tier])
            with torch.device("meta"):
                meta = cls._from_config(config)
            if fit_sections(meta):  # the sections are read when the model is built (ERNIE 4.5 VL): again
                with torch.device("meta"):
                    meta = cls._from_config(config)
            params = sum(p.numel() for p in meta.parameters())
            if params > MAX_PARAMETERS:
                raise RuntimeError(f"the tiny config still has {params / 1e6:.0f}M parameters")
            model = cls._from_config(config)
            model.save_pretrained(folder)
            return type(model).__name__ + TIER_NOTES[tier], tier
        except Exception as e:
            failed = failed or e
    assert failed is not None
    raise failed


def build_hf(model_type: str, folder: Path) -> str:
    """Save a tiny random model of ``model_type`` into ``folder`` (the first tier that builds); its base
    class name."""
    return build_tier(model_type, folder)[0]
