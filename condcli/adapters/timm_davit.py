"""timm DaViT: alternating window (spatial) attention and channel attention blocks.

Every SpatialBlock and every ChannelBlock is one layer. Each block first adds a depthwise-conv position
encoding (``cpe1``) to its input; the attention then adds to that residual stream, so X_l is ``cpe1``'s
output and X is the first block's ``cpe1`` output. SpatialBlock: softmax in windows (its ``nn.Softmax``
module's output). ChannelBlock: a softmax over channels computed functionally, so P is recomputed from
the ``qkv`` output with the module's own formula.
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
    first_output,
    fused_flags,
    group_probs,
    linear_qkv,
    one_group,
    windows_in,
)
from condcli.layout import to_tokens


def matches(model: nn.Module) -> bool:
    if "timm.models.davit" not in sys.modules:  # no model can be one: importing timm takes seconds
        return False
    from timm.models.davit import ChannelBlock, DaVit, SpatialBlock

    if not isinstance(model, DaVit):
        return False
    m: Any = model
    blocks = [b for stage in m.stages for pair in stage.blocks for b in pair.children()]
    return bool(blocks) and all(isinstance(b, SpatialBlock | ChannelBlock) for b in blocks)


def _cpe_output(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    return to_tokens(first_output(args, kwargs, output, batch), "nchw")  # (B, C, H, W) → (B, HW, C)


def _window_probs(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    return group_probs(first_output(args, kwargs, output, batch), batch)  # softmax output (B·nW, H, n, n)


def _split_qkv(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """``qkv(x)`` (B, N, 3C) → q, k, v (B, H, N, C/H) exactly as DaViT's channel attentions split it."""
    b, n, c3 = qkv.shape
    q, k, v = qkv.reshape(b, n, 3, heads, c3 // (3 * heads)).permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v, n


def _channel_probs(
    attn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int
) -> torch.Tensor:
    """ChannelAttention: k = k·scale; P = softmax(kᵀ v) over channels → (B, 1, H, d_h, d_h)."""
    _, k, v, _ = _split_qkv(first_output(args, kwargs, output, batch), int(attn.num_heads))
    k = k * float(attn.scale)
    return (k.transpose(-1, -2) @ v).softmax(dim=-1).unsqueeze(1)


def _channel_probs_v2(
    attn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int
) -> torch.Tensor:
    """ChannelAttentionV2: q scaled by N^-½ (dynamic) or d_h^-½; P = softmax(qᵀ k) → (B, 1, H, d_h, d_h)."""
    q, k, _, n = _split_qkv(first_output(args, kwargs, output, batch), int(attn.groups))
    scale: float = n**-0.5 if attn.dynamic_scale else int(attn.head_dim) ** -0.5
    q = q * scale
    return (q.transpose(-1, -2) @ k).softmax(dim=-1).unsqueeze(1)


def _weights(attn: Any) -> HeadWeights:
    return linear_qkv(attn.qkv.weight, attn.qkv.bias, int(attn.num_heads))


def _weights_v1_channel(attn: Any) -> HeadWeights:
    """ChannelAttention (v1) forms P from timm's k and v and applies it to q: by role W_Q, W_K, W_V are
    the k, v, q slices of ``qkv``."""
    w = linear_qkv(attn.qkv.weight, attn.qkv.bias, int(attn.num_heads))
    return HeadWeights(w.wk, w.wv, w.wq, w.bk, w.bv, w.bq)


def _weights_v2_channel(attn: Any) -> HeadWeights:
    return linear_qkv(attn.qkv.weight, attn.qkv.bias, int(attn.groups))


def _spatial(block: Any, index: int, name: str) -> LayerSpec:
    attn = block.attn
    wh, ww = (int(w) for w in block.window_size)
    return LayerSpec(
        index=index,
        name=name,
        attention=f"softmax in {wh}×{ww} windows",
        heads=int(attn.num_heads),
        x_in=Probe(block.cpe1, _cpe_output, after=True),
        attn_in=Probe(attn, windows_in, after=False),
        probs=Probe(attn.softmax, _window_probs, after=True),  # used when fused_attn is False
        weights=partial(_weights, attn),
    )


def _channel(block: Any, index: int, name: str) -> LayerSpec:
    from timm.models.davit import ChannelAttentionV2

    attn = block.attn
    dim = int(attn.qkv.in_features)
    if isinstance(attn, ChannelAttentionV2):
        heads = int(attn.groups)
        scale = "√N" if attn.dynamic_scale else "√d_h"
        label = f"channel attention softmax(Qᵀ K / {scale}) over channels, {dim // heads}×{dim // heads}"
        take, weights = partial(_channel_probs_v2, attn), partial(_weights_v2_channel, attn)
    else:
        heads = int(attn.num_heads)
        label = f"channel attention softmax(Kᵀ V / √d_h) over channels, {dim // heads}×{dim // heads}"
        take, weights = partial(_channel_probs, attn), partial(_weights_v1_channel, attn)
    return LayerSpec(
        index=index,
        name=name,
        attention=label + " (recomputed from qkv)",
        heads=heads,
        x_in=Probe(block.cpe1, _cpe_output, after=True),
        attn_in=Probe(attn, one_group, after=False),
        probs=Probe(attn.qkv, take, after=True),
        weights=weights,
    )


def build(model: nn.Module) -> Adapter:
    from timm.models.davit import ChannelAttentionV2, SpatialBlock

    m: Any = model  # timm internals are untyped
    layers: list[LayerSpec] = []
    v1_channel = v2_channel = False
    for s, stage in enumerate(m.stages):
        for p, pair in enumerate(stage.blocks):
            for child, block in pair.named_children():
                name = f"stages.{s}.blocks.{p}.{child}"
                if isinstance(block, SpatialBlock):
                    layers.append(_spatial(block, len(layers), name))
                else:
                    layers.append(_channel(block, len(layers), name))
                    if isinstance(block.attn, ChannelAttentionV2):
                        v2_channel = True
                    else:
                        v1_channel = True
    first = layers[0]
    notes = [
        "each block adds a depthwise-conv position encoding (cpe1) to its input first: X_l is cpe1's output, "
        "the residual stream the block's attention adds to",
        "SpatialBlock zero-pads the normalised map to whole windows when H or W is not a multiple of the "
        "window size: A_l then holds those zero rows and P attends to them, as the model does",
    ]
    if v1_channel:
        notes.append(
            "ChannelAttention computes P = softmax(kᵀv·d_h^-½) from timm's k and v and applies it to q: "
            "W_Q, W_K, W_V are taken by role, i.e. the k, v, q slices of qkv"
        )
    if v2_channel:
        notes.append(
            "ChannelAttentionV2 computes P = softmax(qᵀk·scale) and applies it to v (standard roles)"
        )
    return Adapter(
        family="timm-davit",
        model=model,
        embedding=EmbeddingPoint(
            first.x_in.module,
            f"{first.name}.cpe1",
            f"output of {first.name}.cpe1 (stem + the first conv position encoding)",
            layout="nchw",
            after_position_encoding=True,
        ),
        layers=tuple(layers),
        input_kind="images",
        notes=tuple(notes),
        forward=lambda inputs: model(inputs["pixel_values"]),
        fused_flags=fused_flags(model),
    )
