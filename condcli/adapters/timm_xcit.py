"""timm XCiT: cross-covariance attention (XCA) — a softmax over channels, d_h × d_h per head.

X is the output of ``pos_drop`` (conv patch embedding + Fourier position encoding; the class token is only
added before the class-attention blocks). Every XCABlock is one layer; A_l is XCA's input (B, N, C) and P
its channel attention softmax(q̂ k̂ᵀ · temperature), where q̂, k̂ are q, k L2-normalised over the tokens.
"""

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
    if "timm.models.xcit" not in sys.modules:  # no model can be one: importing timm takes seconds
        return False
    from timm.models.xcit import XCA, XCABlock, Xcit

    if not isinstance(model, Xcit):
        return False
    m: Any = model
    return all(isinstance(b, XCABlock) and isinstance(b.attn, XCA) for b in m.blocks)


def _weights(attn: Any) -> HeadWeights:
    # XCA reshapes qkv(x) to (B, N, 3, H, C/H): the timm [Q|K|V], heads-contiguous layout.
    return linear_qkv(attn.qkv.weight, attn.qkv.bias, int(attn.num_heads))


def build(model: nn.Module) -> Adapter:
    m: Any = model  # timm internals are untyped
    layers: list[LayerSpec] = []
    for i, block in enumerate(m.blocks):
        attn = block.attn
        heads = int(attn.num_heads)
        dh = int(attn.qkv.in_features) // heads
        layers.append(
            LayerSpec(
                index=i,
                name=f"blocks.{i}",
                attention=f"cross-covariance attention over channels (XCA), {dh}×{dh}",
                heads=heads,
                x_in=Probe(block, first_input, after=False),  # XCABlock.forward(x, H, W): args[0]
                attn_in=Probe(attn, one_group, after=False),
                probs=Probe(attn.attn_drop, one_group, after=False),
                weights=partial(_weights, attn),
            )
        )
    notes = [
        "XCA L2-normalises q and k over the tokens and scales by a learned per-head temperature: "
        "P (d_h×d_h, over channels) is not a function of W_Q, W_K alone",
    ]
    cls_blocks = m.cls_attn_blocks
    if cls_blocks is not None and len(cls_blocks):
        notes.append(
            f"the {len(cls_blocks)} class-attention block(s) (cls_attn_blocks, after the class token is "
            "prepended) are not analysed"
        )
    has_pos = m.pos_embed is not None
    description = (
        "output of pos_drop (conv patch embedding + Fourier position encoding; no class token yet)"
        if has_pos
        else "output of pos_drop (conv patch embedding; this model has no position encoding)"
    )
    return Adapter(
        family="timm-xcit",
        model=model,
        embedding=EmbeddingPoint(m.pos_drop, "pos_drop", description, after_position_encoding=has_pos),
        layers=tuple(layers),
        input_kind="images",
        notes=tuple(notes),
        forward=lambda inputs: model(inputs["pixel_values"]),
        fused_flags=fused_flags(model),
    )
