"""Tiny timm hybrid vision models for the conformance table: LeViT, EfficientFormer, CoaT, CrossViT, TNT,
GCViT, MobileViT and Swin V2 (see tests/vision_timm.py for the helpers and what each case proves)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from tests.families import F64, Site, nchw_tokens, nhwc_tokens, softmax_probs
from tests.vision_timm import B, Point, create, folded, linear, per_head, split, stacked, tiny, tokens

Tensor = torch.Tensor


# ------------------------------------------------------- LeViT, EfficientFormer: per-head q|k|v, biases


def biased(a: Any, q: Tensor, k: Tensor) -> Tensor:
    """softmax(q kᵀ/√key_dim + the module's attention biases)."""
    return softmax_probs(q, k, a.get_attention_biases(q.device))


def levit() -> nn.Module:
    kw = dict(
        embed_dim=(16, 24), key_dim=8, depth=(1, 1), num_heads=(2, 3), attn_ratio=(2, 2), mlp_ratio=(2, 2)
    )
    return tiny(create("levit_128s", img_size=64, **kw))


def levit_site(a: Any) -> Site:
    heads, kd, vd = int(a.num_heads), int(a.key_dim), int(a.val_dim)
    if hasattr(a, "qkv"):  # the module's own fuse(): its LinearNorm as the eval-mode Linear it computes
        fused = a.qkv.fuse()
        w = per_head(fused.weight, fused.bias, heads, {"q": kd, "k": kd, "v": vd})
        return Site(a, a.proj, w, heads, probs=lambda q, k: biased(a, q, k))
    kv, q = a.kv.fuse(), a.q.ln.fuse()
    w = {"q": (q.weight.T, q.bias), **per_head(kv.weight, kv.bias, heads, {"k": kd, "v": vd})}

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # Q from the subsampled tokens
        sub = a.q.down(x[:, 0])[:, None]
        return (
            split(linear(sub, w["q"]), heads),
            split(linear(x, w["k"]), heads),
            split(linear(x, w["v"]), heads),
        )

    return Site(a, a.proj, w, heads, attend=attend, probs=lambda q, k: biased(a, q, k))


def levit_points(m: Any) -> tuple[Point, list[Point]]:
    names = ["stages.0.blocks.0", "stages.1.downsample", "stages.1.blocks.0"]
    return (names[0], "in", tokens), [(n, "in", tokens) for n in names]


def levit_sites(m: Any) -> list[Site]:
    attns = [m.stages[0].blocks[0].attn, m.stages[1].downsample.attn_downsample, m.stages[1].blocks[0].attn]
    return [levit_site(a) for a in attns]


def efficientformer() -> nn.Module:
    kw = dict(depths=(1, 1, 1, 1), embed_dims=(8, 8, 8, 16), num_vit=1, mlp_ratios=2)
    return tiny(create("efficientformer_l1", **kw))


def efficientformer_sites(m: Any) -> list[Site]:
    a = m.stages[3].blocks[1].token_mixer
    heads, kd, vd = int(a.num_heads), int(a.key_dim), int(a.val_dim)
    w = per_head(a.qkv.weight, a.qkv.bias, heads, {"q": kd, "k": kd, "v": vd})
    return [Site(a, a.proj, w, heads, probs=lambda q, k: biased(a, q, k))]


def efficientformer_points(m: Any) -> tuple[Point, list[Point]]:
    return ("stages.3.blocks.1", "in", tokens), [("stages.3.blocks.1", "in", tokens)]


# ----------------------------------------------- CoaT: factorized attention (no P), conv position encoding


def coat() -> nn.Module:
    kw = dict(
        embed_dims=(16, 16, 16, 16), serial_depths=(1, 1, 1, 1), parallel_depth=1, mlp_ratios=(2, 2, 2, 2)
    )
    return tiny(create("coat_tiny", img_size=32, patch_size=4, num_heads=8, **kw))


def coat_points(m: Any) -> tuple[Point, list[Point]]:
    """X: the shared conv position encoding cpe1's first output; X_l: each attention's pre-norm input."""
    norms = [f"serial_blocks{i}.0.norm1" for i in range(1, 5)]
    norms += [f"parallel_blocks.0.norm1{i}" for i in range(2, 5)]
    return ("cpe1", "out", tokens), [(n, "in", tokens) for n in norms]


def coat_sites(m: Any) -> list[Site]:
    serial = [getattr(m, f"serial_blocks{i}")[0].factoratt_crpe for i in range(1, 5)]
    block = m.parallel_blocks[0]
    attns = serial + [getattr(block, f"factoratt_crpe{i}") for i in range(2, 5)]
    return [Site(a, a.proj, stacked(a), int(a.num_heads)) for a in attns]


# ------------------------------------------------------------- CrossViT: two branches and class attention


def crossvit() -> nn.Module:
    kw = dict(patch_size=(8, 16), embed_dim=(16, 32), depth=((1, 1, 0),), num_heads=(2, 2))
    return tiny(create("crossvit_tiny_240", img_size=32, mlp_ratio=(2.0, 2.0, 1.0), **kw))


def cross_site(a: Any) -> Site:
    """CrossAttention: only the first token (this branch's class token) queries."""
    w = {r: (getattr(a, f"w{r}").weight.T, getattr(a, f"w{r}").bias) for r in "qkv"}
    heads = int(a.num_heads)

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q = split(linear(x[..., :1, :], w["q"]), heads)
        return q, split(linear(x, w["k"]), heads), split(linear(x, w["v"]), heads)

    return Site(a, a.proj, w, heads, attend=attend, probs=softmax_probs)


def crossvit_points(m: Any) -> tuple[Point, list[Point]]:
    names = ["blocks.0.blocks.0.0", "blocks.0.blocks.1.0", "blocks.0.fusion.0", "blocks.0.fusion.1"]
    return (names[0], "in", tokens), [(n, "in", tokens) for n in names]


def crossvit_sites(m: Any) -> list[Site]:
    block = m.blocks[0]
    attns = [b[0].attn for b in block.blocks]
    selfs = [Site(a, a.proj, stacked(a), int(a.num_heads), probs=softmax_probs) for a in attns]
    return selfs + [cross_site(f.attn) for f in block.fusion]


# ----------------------------------------------------------------- TNT: inner (pixels) and outer attention


def tnt() -> nn.Module:
    kw = dict(embed_dim=32, inner_dim=8, depth=1, num_heads_outer=2, num_heads_inner=2, first_stride=4)
    return tiny(create("tnt_s_patch16_224", img_size=32, patch_size=16, **kw))


def tnt_points(m: Any) -> tuple[Point, list[Point]]:
    """X: the patch tokens after patch_pos (pos_drop's output); X_l: each attention's pre-norm input (the
    pixel stream folded as (B·patches, pixels, c), then the patch stream)."""
    return ("pos_drop", "out", tokens), [
        ("blocks.0.norm_in", "in", folded),
        ("blocks.0.norm_out", "in", tokens),
    ]


def tnt_sites(m: Any) -> list[Site]:
    out = []
    for a in (m.blocks[0].attn_in, m.blocks[0].attn_out):
        w = {**stacked(a, "qk", "qk"), "v": (a.v.weight.T, a.v.bias)}
        out.append(Site(a, a.proj, w, int(a.num_heads), probs=softmax_probs))
    return out


# -------------------------------------------------------------- GCViT: local windows, a global query


def gcvit() -> nn.Module:
    from timm.models.gcvit import GlobalContextVit

    kw = dict(embed_dim=16, depths=(2, 2), num_heads=(2, 4), window_size=(4, 4), mlp_ratio=2.0)
    return tiny(lambda: GlobalContextVit(img_size=64, num_classes=4, **kw))


GLOBAL: dict[int, Tensor] = {}  # id(stage) → its global query (B, h, w, c), from the reference forward


def gcvit_points(m: Any) -> tuple[Point, list[Point]]:
    names = [f"stages.{s}.blocks.{b}" for s in range(2) for b in range(2)]
    return (names[0], "in", nhwc_tokens), [(n, "in", nhwc_tokens) for n in names]


def gcvit_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X, X_l from hooks; each stage's global query (its global_norm output) kept for the global sites."""
    from tests.vision_timm import hooked

    handles = [
        s.global_norm.register_forward_hook(lambda _m, _a, o, s=s: GLOBAL.__setitem__(id(s), o.detach()))
        for s in m.stages
    ]
    try:
        return hooked(gcvit_points)(m, img)
    finally:
        for h in handles:
            h.remove()


def gcvit_site(stage: Any, a: Any) -> Site:
    heads, n = int(a.num_heads), math.prod(a.window_size)
    bias = a.rel_pos.get_bias().reshape(-1, n, n)
    probs = lambda q, k: softmax_probs(q, k, bias)  # noqa: E731
    if not a.use_global:
        return Site(a, a.proj, stacked(a), heads, probs=probs)
    c = a.qkv.in_features
    w = {"q": (torch.eye(c), None), **stacked(a, "kv")}  # the global query, with no projection

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        g = GLOBAL[id(stage)].to(F64).reshape(B, 1, n, c)  # the same query tokens in every window
        q = split(g, heads).expand(-1, x.shape[1], -1, -1, -1)
        return q, split(linear(x, w["k"]), heads), split(linear(x, w["v"]), heads)

    return Site(a, a.proj, w, heads, attend=attend, probs=probs)


def gcvit_sites(m: Any) -> list[Site]:
    return [gcvit_site(s, b.attn) for s in m.stages for b in s.blocks]


# ------------------------------------------------ MobileViT: unfolded patches are groups, not samples


def mobilevit() -> nn.Module:
    from timm.models.byobnet import ByobNet, ByoModelCfg
    from timm.models.mobilevit import _inverted_residual_block, _mobilevit_block

    blocks = (
        _inverted_residual_block(d=1, c=8, s=1, br=2.0),
        _mobilevit_block(d=1, c=16, s=2, transformer_dim=16, transformer_depth=2, patch_size=2, br=2.0),
    )
    cfg = ByoModelCfg(
        blocks=blocks, stem_chs=8, stem_type="3x3", stem_pool="", downsample="", act_layer="silu"
    )
    return tiny(lambda: ByobNet(cfg=ByoModelCfg(**{**cfg.__dict__, "num_features": 32}), num_classes=4))


def mobilevit_points(m: Any) -> tuple[Point, list[Point]]:
    """X: the map before unfolding (conv_1x1's output, NCHW: the same tokens in spatial order); X_l: each
    transformer block's input, (B·P, N, c) with the images outermost, side by side per image."""
    names = ["stages.1.1.transformer.0", "stages.1.1.transformer.1"]
    return ("stages.1.1.conv_1x1", "out", nchw_tokens), [(n, "in", folded) for n in names]


def mobilevit_sites(m: Any) -> list[Site]:
    return [
        Site(b.attn, b.attn.proj, stacked(b.attn), int(b.attn.num_heads), probs=softmax_probs)
        for b in m.stages[1][1].transformer
    ]


# --------------------------------------------------------------- Swin V2: cosine attention, continuous bias


def swinv2() -> nn.Module:
    kw = dict(img_size=32, patch_size=4, embed_dim=16, depths=(2,), num_heads=(2,), window_size=4)
    return tiny(create("swinv2_tiny_window8_256", **kw))


def swinv2_probs(blk: Any, q: Tensor, k: Tensor) -> Tensor:
    """softmax(cos(q, k)·exp(min(logit_scale, log 100)) + 16·σ(cpb_mlp bias) [+ shift mask])."""
    a, n = blk.attn, q.shape[-2]
    logits = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-1, -2)
    logits = logits * torch.clamp(a.logit_scale.detach().to(F64), max=math.log(100.0)).exp()
    table = a.cpb_mlp(a.relative_coords_table).view(-1, a.num_heads)
    bias = table[a.relative_position_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
    logits = logits + 16 * torch.sigmoid(bias.detach().to(F64))
    if blk.attn_mask is not None:
        logits = logits + blk.attn_mask.detach().to(F64)[None, :, None]
    return logits.softmax(dim=-1)


def swinv2_sites(m: Any) -> list[Site]:
    out = []
    for blk in m.layers[0].blocks:
        a = blk.attn
        w = stacked(a)
        bias = torch.cat((a.q_bias, a.k_bias, a.v_bias)).chunk(3)
        w = {r: (w[r][0], bias[i]) for i, r in enumerate("qkv")}
        out.append(Site(a, a.proj, w, int(a.num_heads), probs=lambda q, k, blk=blk: swinv2_probs(blk, q, k)))
    return out


def swinv2_points(m: Any) -> tuple[Point, list[Point]]:
    names = ["layers.0.blocks.0", "layers.0.blocks.1"]
    return (names[0], "in", nhwc_tokens), [(n, "in", nhwc_tokens) for n in names]
