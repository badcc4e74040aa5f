"""Tiny random configs of transformers model types, for the breadth sweep (bench/sweep_architectures.py) and
the tests that build the models it found.

A model type is built at the first of three sizes (:data:`TIERS`) that builds and, in the sweep, runs:

1. :data:`SCALARS`: 64 wide, 4 heads of 16, 2 layers;
2. :data:`WIDE_HEADS`: the same depth with heads of 128 (2 heads, 256 wide), for models whose code assumes a
   head as wide as their real one (GLM's M-RoPE sections, CodeGen's and GPT-J's rotary width, Kimi's latent
   rope width);
3. :data:`DEPTH_ONLY`: only the depths cut, every width as the config has it (stage widths that must agree,
   as in SAM 2's Hiera, or LiLT's layout channels).

:func:`fit` keeps the widths a config ties to each other in agreement at every size.
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


def fit(config: Any) -> None:
    """Widths that ``config`` ties to each other made to agree again after :func:`shrink` (in place):
    a rotary width no wider than a head (CodeGen, GPT-J), and LayoutLMv3's 4·coordinate + 2·shape = width."""
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
    fit(config)
    if depth > 2:
        return
    for key in list(vars(config)):
        sub = getattr(config, key, None)
        if isinstance(sub, PretrainedConfig):
            shrink(sub, sizes, depth + 1)


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
