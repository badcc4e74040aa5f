"""Conformance cases: timm models whose attention computes its softmax as a plain function (no module, no
returned weights), so the generic adapter observes P inside the attention's call (condcli.adapters.
softmax_tap). Each P is recomputed in float64 with the family's own bias, rotation or head mixing; P·V is
checked against what the output projection (or, for EVA's scale-norm, the norm before it) receives.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch
from timm.layers import apply_rot_embed_cat
from torch import nn

from tests.families import (
    F64,
    Case,
    Site,
    Tensor,
    fused,
    images,
    linears,
    softmax_probs,
    timm_model,
    vit_layers,
)

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2)  # 4×4 patches, d 32, 2 heads


def with_side_biases(model: nn.Module) -> nn.Module:
    """BEiT/EVA keep the qkv bias beside a bias-free ``qkv`` (q_bias, a zero k_bias, v_bias), zero at init:
    made nonzero, so that a bias read wrongly (or not at all) would show."""
    with torch.no_grad():
        for mod in model.modules():
            for name in ("q_bias", "v_bias"):
                if isinstance(getattr(mod, name, None), nn.Parameter):
                    getattr(mod, name).normal_(0.0, 0.5)
    return model


def side_bias_site(a: Any, proj: nn.Module, **kw: Any) -> Site:
    """A fused [Q|K|V] ``qkv`` without bias, its bias kept beside it as q_bias, k_bias (zeros), v_bias."""
    w = a.qkv.weight.chunk(3, dim=0)
    b = (a.q_bias, a.k_bias if a.k_bias is not None else torch.zeros_like(a.q_bias), a.v_bias)
    return Site(a, proj, {r: (w[i].T, b[i]) for i, r in enumerate("qkv")}, int(a.num_heads), **kw)


# ------------------------------------------------------------------------ BEiT: relative position bias


def beit() -> nn.Module:
    return with_side_biases(timm_model("beit_base_patch16_224", **TINY))


def beit_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = class token + patch embedding (BEiT-base has no absolute position embedding); X_l: the blocks."""
    x = m.patch_embed(img)
    x = m.pos_drop(torch.cat((m.cls_token.expand(x.shape[0], -1, -1), x), dim=1))
    x_layers = []
    for blk in m.blocks:
        x_layers.append(x)
        x = blk(x, shared_rel_pos_bias=None)
    return x_layers[0], x_layers


def beit_probs(a: Any, q: Tensor, k: Tensor) -> Tensor:
    """softmax(q kᵀ/√d_h + the attention's own relative position bias (1, H, n, n))."""
    return softmax_probs(q, k, a._get_rel_pos_bias()[0])


def beit_sites(m: Any) -> list[Site]:
    return [side_bias_site(b.attn, b.attn.proj, probs=partial(beit_probs, b.attn)) for b in m.blocks]


# --------------------------------------------------------- EVA-02 and the RoPE / register ViTs (timm Eva)


def eva(name: str, **kw: Any) -> nn.Module:
    return with_side_biases(timm_model(name, **TINY, **kw))


def eva_ropes(m: Any) -> list[Tensor | None]:
    """The rotary embedding each block receives, as the model computes it (mixed RoPE: one per depth)."""
    size = m.patch_embed.img_size
    _, rope = m._pos_embed(m.patch_embed(torch.zeros(1, 3, *size)))
    mixed = getattr(m, "rope_mixed", False) and rope is not None
    return [rope[i] if mixed else rope for i in range(len(m.blocks))]


def eva_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = the first block's input (patch embedding, prefix tokens, absolute position embedding, norm_pre);
    X_l: the blocks called in order with their rotary embeddings."""
    x, _ = m._pos_embed(m.patch_embed(img))
    x = m.norm_pre(x)
    x_layers = []
    for blk, rope in zip(m.blocks, eva_ropes(m), strict=True):
        x_layers.append(x)
        x = blk(x, rope=rope)
    return x_layers[0], x_layers


def rope_probs(a: Any, rope: Tensor | None, q: Tensor, k: Tensor) -> Tensor:
    """softmax(q' k'ᵀ/√d_h) with q, k normalised by the attention's q/k norms and rotated by timm's own
    apply_rot_embed_cat (float64), the prefix (class / register) tokens left unrotated."""
    q, k = a.q_norm(q), a.k_norm(k)
    if rope is not None:
        npt, emb = a.num_prefix_tokens, rope.detach().to(F64)

        def rotate(t: Tensor) -> Tensor:
            rotated = apply_rot_embed_cat(t[..., npt:, :], emb, half=a.rotate_half)
            return torch.cat([t[..., :npt, :], rotated], dim=-2)

        q, k = rotate(q), rotate(k)
    return softmax_probs(q, k)


def eva_sites(m: Any) -> list[Site]:
    """P·V enters the attention's scale norm before ``proj`` (an Identity where the model has none)."""
    sites = []
    for blk, rope in zip(m.blocks, eva_ropes(m), strict=True):
        a, probs = blk.attn, partial(rope_probs, blk.attn, rope)
        if getattr(a, "q_bias", None) is not None:
            sites.append(side_bias_site(a, a.norm, probs=probs))
        else:
            sites.append(replace(fused(a, probs=probs), proj=a.norm))
    return sites


# ---------------------------------------------------------------- CaiT: talking heads, class attention


def cait(token_only: int = 0) -> nn.Module:
    return timm_model("cait_xxs24_224", **TINY, depth_token_only=token_only)


def cait_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = patch embedding + position embedding; X_l: the self-attention blocks' inputs, then each class-
    attention block's stream [class token; patch tokens] (what its pre-norm reads)."""
    x = m.pos_drop(m.patch_embed(img) + m.pos_embed)
    x_layers = []
    for blk in m.blocks:
        x_layers.append(x)
        x = blk(x)
    cls = m.cls_token.expand(x.shape[0], -1, -1)
    for blk in m.blocks_token_only:
        x_layers.append(torch.cat((cls, x), dim=1))
        cls = blk(x, cls)
    return x_layers[0], x_layers


def heads_mixed(lin: nn.Linear, t: Tensor) -> Tensor:
    """A talking-heads nn.Linear(H, H) over the heads axis of (B, G, H, q, k), in float64."""
    w, b = lin.weight.detach().to(F64), lin.bias.detach().to(F64)
    return torch.einsum("gh,bnhqk->bngqk", w, t) + b[:, None, None]


def talking_probs(a: Any, q: Tensor, k: Tensor) -> Tensor:
    """softmax(proj_l(q kᵀ/√d_h)): the heads are mixed before the softmax (P is that softmax)."""
    return heads_mixed(a.proj_l, q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).softmax(dim=-1)


def class_probs(q: Tensor, k: Tensor) -> Tensor:
    """Class attention: only the class token queries, P is 1 × (N + 1) per head."""
    return softmax_probs(q[..., :1, :], k)


def cait_sites(m: Any) -> list[Site]:
    """Talking-heads blocks (P mixed across heads again by proj_w before it multiplies V), then the
    class-attention blocks (separate q, k, v)."""
    sites = [
        replace(fused(a, probs=partial(talking_probs, a)), post=partial(heads_mixed, a.proj_w))
        for a in (b.attn for b in m.blocks)
    ]
    classes = [b.attn for b in m.blocks_token_only]
    return sites + [linears(a, a.proj, a.q, a.k, a.v, probs=class_probs) for a in classes]


# ------------------------------------------------------------------------------------------ the table


def eva_case(name: str) -> Case:
    return Case(partial(eva, name), images, eva_sites, eva_layers)


def vit_reg4() -> nn.Module:
    return timm_model("vit_medium_patch16_reg4_gap_256", **TINY)


CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "beit": Case(beit, images, beit_sites, beit_layers),
        "eva02": eva_case("eva02_tiny_patch14_224"),
        "vit_rope": eva_case("vit_small_patch16_rope_224"),
        "vit_rope_mixed": eva_case("vit_small_patch16_rope_mixed_224"),  # a rotation per depth and head
        "vit_rope_reg4": eva_case("vit_betwixt_patch16_rope_reg4_gap_256"),  # 4 unrotated register tokens
        "cait": Case(cait, images, cait_sites, cait_layers),  # talking-heads self-attention only
    },
    # a register ViT without RoPE is timm's VisionTransformer: the timm_vit family (X with its 4 registers)
    "timm_vit": {
        "vit_reg4_gap": Case(vit_reg4, images, lambda m: [fused(b.attn) for b in m.blocks], vit_layers)
    },
}
