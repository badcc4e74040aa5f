"""timm SwinTransformer: softmax attention inside (shifted) windows, with a relative position bias.

Swin has no absolute position embedding, so X is the first-block input: the output of ``patch_embed``
(NHWC). Every SwinTransformerBlock of every stage is one layer. A_l is what WindowAttention receives —
the windows of the (for shifted blocks: cyclically shifted, and where needed zero-padded) normalised
feature map — and P its softmax(q kᵀ·scale + relative position bias + shift mask), per window.
"""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import (
    Adapter,
    EmbeddingPoint,
    HeadWeights,
    LayerSpec,
    Probe,
    first_input,
    fused_flags,
    group_probs,
    linear_qkv,
    windows_in,
)
from condcli.layout import to_tokens


def matches(model: nn.Module) -> bool:
    if "timm.models.swin_transformer" not in sys.modules:  # no model can be one: importing timm takes seconds
        return False
    from timm.models.swin_transformer import SwinTransformer, SwinTransformerBlock, WindowAttention

    if not isinstance(model, SwinTransformer):
        return False
    m: Any = model
    blocks = [b for stage in m.layers for b in stage.blocks]
    return bool(blocks) and all(
        isinstance(b, SwinTransformerBlock) and isinstance(b.attn, WindowAttention) for b in blocks
    )


def _block_input(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    return to_tokens(first_input(args, kwargs, output, batch), "nhwc")  # (B, H, W, C) → (B, HW, C)


def _probs(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    return group_probs(first_input(args, kwargs, output, batch), batch)  # attn_drop input (B·nW, H, n, n)


def _weights(attn: Any) -> HeadWeights:
    return linear_qkv(attn.qkv.weight, attn.qkv.bias, int(attn.num_heads))


def build(model: nn.Module) -> Adapter:
    m: Any = model  # timm internals are untyped
    layers: list[LayerSpec] = []
    notes: list[str] = []
    padded: list[str] = []
    dynamic = bool(getattr(m, "dynamic_img_size", False))
    for s, stage in enumerate(m.layers):
        for b, block in enumerate(stage.blocks):
            attn = block.attn
            name = f"layers.{s}.blocks.{b}"
            wh, ww = (int(w) for w in block.window_size)
            shifted = any(int(v) for v in block.shift_size)
            h, w = (int(v) for v in block.input_resolution)
            if not dynamic and (h % wh or w % ww):
                padded.append(f"{name} ({h}×{w} in {wh}×{ww} windows)")
            layers.append(
                LayerSpec(
                    index=len(layers),
                    name=name,
                    attention=f"softmax in {wh}×{ww} windows" + (" (shifted)" if shifted else ""),
                    heads=int(attn.num_heads),
                    x_in=Probe(block, _block_input, after=False),
                    attn_in=Probe(attn, windows_in, after=False),
                    probs=Probe(attn.attn_drop, _probs, after=False),
                    weights=partial(_weights, attn),
                )
            )
    notes.append(
        "P includes the relative position bias (and, in shifted blocks, the shift mask): "
        "it is not a function of W_Q, W_K alone"
    )
    notes.append("in shifted blocks A_l and P are the windows of the cyclically shifted feature map")
    if padded:
        notes.append(
            "zero padding (after norm1) fills the last windows of "
            + ", ".join(padded)
            + ": A_l holds those zero rows and P attends to them, as the model does"
        )
    if dynamic:
        notes.append(
            "dynamic image size: windows, padding and the shift mask follow each input's feature-map size"
        )
    return Adapter(
        family="timm-swin",
        model=model,
        embedding=EmbeddingPoint(
            m.patch_embed,
            "patch_embed",
            "output of patch_embed (first-block input: Swin has no absolute position embedding, "
            "only a relative position bias inside window attention)",
            layout="nhwc",
            after_position_encoding=False,
        ),
        layers=tuple(layers),
        input_kind="images",
        notes=tuple(notes),
        forward=lambda inputs: model(inputs["pixel_values"]),
        fused_flags=fused_flags(model),
    )
