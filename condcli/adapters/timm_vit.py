"""timm VisionTransformer (ViT, DeiT and their variants): global softmax attention over all tokens."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

from torch import nn

from condcli.adapters.base import (
    Adapter,
    EmbeddingPoint,
    HeadWeights,
    LayerSpec,
    Probe,
    first_input,
    fused_flags,
    linear_qkv,
    one_group,
)


def matches(model: nn.Module) -> bool:
    if "timm.models.vision_transformer" not in sys.modules:  # no model can be one: importing it takes seconds
        return False
    from timm.layers.attention import Attention
    from timm.models.vision_transformer import VisionTransformer

    return isinstance(model, VisionTransformer) and all(isinstance(b.attn, Attention) for b in model.blocks)


def _weights(attn: Any) -> HeadWeights:
    return linear_qkv(attn.qkv.weight, attn.qkv.bias, int(attn.num_heads))


def build(model: nn.Module) -> Adapter:
    m: Any = model  # timm internals are untyped
    layers: list[LayerSpec] = []
    notes: list[str] = []
    for i, block in enumerate(m.blocks):
        attn = block.attn
        if not isinstance(attn.q_norm, nn.Identity):
            notes.append(
                f"blocks.{i}: q/k are normalised per head (qk_norm); P is not a function of W_Q, W_K alone"
            )
        layers.append(
            LayerSpec(
                index=i,
                name=f"blocks.{i}",
                attention="softmax over all tokens",
                heads=int(attn.num_heads),
                x_in=Probe(block, first_input, after=False),
                attn_in=Probe(attn, one_group, after=False),
                probs=Probe(attn.attn_drop, one_group, after=False),
                weights=partial(_weights, attn),
            )
        )
    if not isinstance(m.norm_pre, nn.Identity):
        notes.append("norm_pre sits between X (pos_drop output) and the first block")
    return Adapter(
        family="timm-vit",
        model=model,
        embedding=EmbeddingPoint(
            m.pos_drop,
            "pos_drop",
            "output of pos_drop (patch embedding + class token + position embedding)",
        ),
        layers=tuple(layers),
        input_kind="images",
        notes=tuple(notes),
        forward=lambda inputs: model(inputs["pixel_values"]),
        fused_flags=fused_flags(model),
    )
