"""Tiny HF vision towers for the conformance table (tests/cases_vision.py): DeiT, DINOv2 with registers,
CLIP and SigLIP vision, BEiT (relative position bias) and Swin (windows).

DeiT to BEiT: X and X_l are ``hidden_states``, P is ``output_attentions`` (eager). Swin's hidden_states are
stage outputs and its attentions are per window, so X, X_l come from the test's own hooks on its layers and
P is recomputed in float64 with the layer's own relative position bias and shift mask.
"""

from __future__ import annotations

from typing import Any

import torch
import transformers as tf
from torch import nn

from tests.families import F64, INIT, Site, linears, softmax_probs
from tests.vision_timm import Point, hooked, tokens

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
VISION = dict(image_size=32, patch_size=8, initializer_range=INIT, **SMALL)


def _seeded(build: Any) -> nn.Module:
    torch.manual_seed(0)
    model: nn.Module = build().eval()
    return model


def deit() -> nn.Module:
    return _seeded(lambda: tf.DeiTModel(tf.DeiTConfig(**VISION)))


def dinov2_registers() -> nn.Module:
    return _seeded(
        lambda: tf.Dinov2WithRegistersModel(tf.Dinov2WithRegistersConfig(num_register_tokens=2, **VISION))
    )


def clip_vision() -> nn.Module:
    return _seeded(lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig(**VISION)))


def siglip_vision() -> nn.Module:
    return _seeded(lambda: tf.SiglipVisionModel(tf.SiglipVisionConfig(**VISION)))


def beit() -> nn.Module:
    return _seeded(lambda: tf.BeitModel(tf.BeitConfig(use_relative_position_bias=True, **VISION)))


def attention_sites(m: Any) -> list[Site]:
    """Every attention module holding q_proj/k_proj/v_proj, in order (the pooling head's aside: SigLIP's
    multi-head attention pooling is not a transformer block)."""
    out = []
    for name, a in m.named_modules():
        if hasattr(a, "q_proj") and "head" not in name.split("."):
            proj = getattr(a, "o_proj", None) or getattr(a, "out_proj", None)
            out.append(linears(a, proj, a.q_proj, a.k_proj, a.v_proj))
    return out


def swin() -> nn.Module:
    config = tf.SwinConfig(
        image_size=32,
        patch_size=2,
        embed_dim=16,
        depths=[2],
        num_heads=[2],
        window_size=4,
        initializer_range=INIT,
    )
    return _seeded(lambda: tf.SwinModel(config))


def swin_points(m: Any) -> tuple[Point, list[Point]]:
    names = ["encoder.layers.0.blocks.0", "encoder.layers.0.blocks.1"]
    return (names[0], "in", tokens), [(n, "in", tokens) for n in names]


def swin_probs(layer: Any, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ/√d_h + the layer's relative position bias [+ its shift mask]) per window."""
    bias = layer.attention.relative_position_bias().reshape(-1, q.shape[-2], q.shape[-2])
    h, w = layer.input_resolution
    mask = layer.get_attn_mask(h, w, F64, q.device)
    return softmax_probs(q, k, bias, mask)


def swin_sites(m: Any) -> list[Site]:
    out = []
    for layer in m.encoder.layers[0].blocks:
        a = layer.attention
        site = linears(a, a.o_proj, a.q_proj, a.k_proj, a.v_proj)
        out.append(
            Site(a, a.o_proj, site.w, site.heads, probs=lambda q, k, layer=layer: swin_probs(layer, q, k))
        )
    return out


swin_layers = hooked(swin_points)
