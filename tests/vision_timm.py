"""Tiny timm hierarchical and hybrid vision models for the conformance table (tests/cases_vision.py).

Each model is built seeded with attention sharpened (as tests/families.py's ``timm_model``), and each
attention layer is found in the model itself: its projections split from the module's own weights (LeViT's
Linear+BatchNorm folded by the module's own ``fuse``), and, where Q or K/V are not A_l's tokens projected,
the q, k, v it attends with recomputed in float64 from A_l with the module's own parts (PVT/Twins spatial
reduction, MViT pooling, Hiera's mask units and q pooling, LeViT's subsampled queries, CrossViT's class
token, GCViT's global query). X and X_l come from hooks on the model's own modules (see :func:`hooked`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import timm
import torch
from torch import nn
from torch.nn import functional as F

from tests.families import F64, QKV_GAIN, Layers, Site, nhwc_tokens, softmax_probs

Tensor = torch.Tensor
B = 2


def tiny(build: Callable[[], nn.Module]) -> nn.Module:
    """Seeded, eval, attention sharpened, relative biases informative, fused attention ON."""
    torch.manual_seed(0)
    model = build().eval()
    with torch.no_grad():
        for path, mod in model.named_modules():
            if path.rsplit(".", 1)[-1] in ("qkv", "q", "qk", "wq"):
                lin = mod[-1] if isinstance(mod, nn.Sequential) else mod
                lin = getattr(lin, "linear", lin)  # LeViT's LinearNorm
                if isinstance(lin, nn.Linear):
                    lin.weight.mul_(QKV_GAIN)
            for name in ("relative_position_bias_table", "attention_biases"):
                if isinstance(getattr(mod, name, None), nn.Parameter):
                    getattr(mod, name).normal_(0.0, 1.0)
            if isinstance(getattr(mod, "fused_attn", None), bool):
                mod.fused_attn = True
    return model


def create(name: str, **kw: Any) -> Callable[[], nn.Module]:
    return lambda: timm.create_model(name, pretrained=False, num_classes=4, **kw)


# a point where the test reads a tensor: (module path, "in" or "out", → (B, N, d) tokens)
Point = tuple[str, str, Callable[[Tensor], Tensor]]


def hooked(points: Callable[[Any], tuple[Point, list[Point]]]) -> Layers:
    """X and X_l read by the test's own hooks on the model's own modules (each at its first call)."""

    def layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
        x_point, l_points = points(m)
        seen: dict[int, Tensor] = {}
        handles = []
        for i, (path, where, _) in enumerate([x_point, *l_points]):
            mod = m.get_submodule(path)

            def keep(t: Any, i: int = i) -> None:
                t = t[0] if isinstance(t, tuple | list) else t
                seen.setdefault(i, t.detach())

            if where == "in":
                handles.append(mod.register_forward_pre_hook(lambda _m, a, keep=keep: keep(a)))
            else:
                handles.append(mod.register_forward_hook(lambda _m, _a, o, keep=keep: keep(o)))
        try:
            m(img)
        finally:
            for h in handles:
                h.remove()
        fs = [p[2] for p in (x_point, *l_points)]
        return fs[0](seen[0]), [f(seen[i + 1]) for i, f in enumerate(fs[1:])]

    return layers


def tokens(x: Tensor) -> Tensor:
    return x


def folded(x: Tensor) -> Tensor:
    """(B·G, n, c), images outermost → (B, G·n, c)."""
    return x.reshape(B, -1, x.shape[-1])


def rows(w: Tensor, b: Tensor | None, index: Tensor) -> tuple[Tensor, Tensor | None]:
    """The right-multiplying d × r matrix (and bias) of a projection's output rows ``index``."""
    return w[index].T, None if b is None else b[index]


def stacked(a: Any, parts: str = "qkv", lin: str = "qkv") -> dict[str, tuple[Tensor, Tensor | None]]:
    """Weights of a projection stacking ``parts`` ([Q|K|V], [K|V], [Q|K]) in equal row blocks."""
    m = getattr(a, lin)
    ws, bias = m.weight.chunk(len(parts)), m.bias
    bs = bias.chunk(len(parts)) if bias is not None else (None,) * len(parts)
    return {r: (ws[i].T, bs[i]) for i, r in enumerate(parts)}


def per_head(
    w: Tensor, b: Tensor | None, heads: int, widths: dict[str, int]
) -> dict[str, tuple[Tensor, Tensor | None]]:
    """Weights of a projection whose rows are (H, Σ widths), each head's parts side by side."""
    r = torch.arange(w.shape[0]).view(heads, -1)
    out, start = {}, 0
    for role, width in widths.items():
        out[role] = rows(w, b, r[:, start : start + width].flatten())
        start += width
    return out


def split(y: Tensor, heads: int) -> Tensor:
    """(…, n, H·d) → (…, H, n, d)."""
    return y.unflatten(-1, (heads, -1)).transpose(-2, -3)


def linear(x: Tensor, wb: tuple[Tensor, Tensor | None]) -> Tensor:
    w, b = wb
    y = x.to(F64) @ w.detach().to(F64)
    return y if b is None else y + b.detach().to(F64)


def side(x: Tensor) -> int:
    return math.isqrt(x.shape[-2])


def layer_norm(x: Tensor, norm: nn.LayerNorm) -> Tensor:
    w, b = norm.weight.detach().to(F64), norm.bias.detach().to(F64)
    return F.layer_norm(x, norm.normalized_shape, w, b, norm.eps)


# ----------------------------------------------------------------------------- spatial reduction: PVT, Twins


def reduced(a: Any, x: Tensor) -> Tensor:
    """The tokens K and V are projected from: A_l (B, 1, N, c) through ``sr`` (a strided conv) and norm."""
    if getattr(a, "sr", None) is None:
        return x
    n = side(x)
    grid = x[:, 0].transpose(1, 2).reshape(B, -1, n, n)
    y = F.conv2d(grid, a.sr.weight.detach().to(F64), a.sr.bias.detach().to(F64), stride=a.sr.stride)
    return layer_norm(y.flatten(2).transpose(1, 2), a.norm)[:, None]


def sr_site(a: Any) -> Site:
    w = {"q": (a.q.weight.T, a.q.bias), **stacked(a, "kv", "kv")}
    heads = int(a.num_heads)

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        kv = reduced(a, x)
        return (
            split(linear(x, w["q"]), heads),
            split(linear(kv, w["k"]), heads),
            split(linear(kv, w["v"]), heads),
        )

    return Site(a, a.proj, w, heads, attend=attend, probs=softmax_probs)


def windows_site(a: Any) -> Site:
    """Twins LSA: the module splits A_l (B, 1, N, c) into ws × ws windows itself (no padding here)."""
    w, heads, ws = stacked(a), int(a.num_heads), int(a.ws)

    def part(x: Tensor) -> Tensor:
        n = side(x)
        g = x[:, 0].reshape(B, n // ws, ws, n // ws, ws, -1).transpose(2, 3)
        return g.reshape(B, (n // ws) ** 2, ws * ws, -1)

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        g = part(x)
        return tuple(split(linear(g, w[r]), heads) for r in "qkv")  # type: ignore[return-value]

    def merge(o: Tensor) -> Tensor:
        y = o.transpose(2, 3).flatten(-2)  # (B, G, n, c)
        h = math.isqrt(y.shape[1])
        y = y.reshape(B, h, h, ws, ws, -1).transpose(2, 3).reshape(B, 1, -1, y.shape[-1])
        return y

    return Site(a, a.proj, w, heads, attend=attend, merge=merge, probs=softmax_probs)


def pvt_v2() -> nn.Module:
    kw = dict(depths=(1, 1), embed_dims=(16, 32), num_heads=(1, 2), sr_ratios=(4, 1), mlp_ratios=(2, 2))
    return tiny(create("pvt_v2_b0", **kw))


def pvt_points(m: Any) -> tuple[Point, list[Point]]:
    return ("stages.0.blocks.0", "in", tokens), [
        ("stages.0.blocks.0", "in", tokens),
        ("stages.1.blocks.0", "in", tokens),
    ]


def pvt_sites(m: Any) -> list[Site]:
    return [sr_site(s.blocks[0].attn) for s in m.stages]


def twins() -> nn.Module:
    kw = dict(depths=(2, 2), embed_dims=(16, 32), num_heads=(2, 2), sr_ratios=(2, 1), wss=(4, 2))
    return tiny(create("twins_svt_small", img_size=32, mlp_ratios=(2, 2), **kw))


def twins_points(m: Any) -> tuple[Point, list[Point]]:
    names = [f"blocks.{i}.{j}" for i in range(2) for j in range(2)]
    return (names[0], "in", tokens), [(n, "in", tokens) for n in names]


def twins_sites(m: Any) -> list[Site]:
    return [windows_site(b.attn) if hasattr(b.attn, "ws") else sr_site(b.attn) for s in m.blocks for b in s]


# ------------------------------------------------------------------------------------ MViTv2: pooled Q, K, V


def mvit() -> nn.Module:
    from timm.models import mvitv2

    cfg = dataclasses.replace(mvitv2.model_cfgs["mvitv2_tiny"], depths=(1, 1), embed_dim=16, num_heads=1)
    return tiny(lambda: mvitv2.MultiScaleVit(cfg=cfg, img_size=32, num_classes=4))


def pooled(a: Any, which: str, t: Tensor) -> Tensor:
    """timm's MViT pooling of a per-head (B, 1, H, N, d) tensor, in float64: the module's conv, then norm."""
    pool, norm = getattr(a, f"pool_{which}"), getattr(a, f"norm_{which}")
    n = side(t)
    x = t[:, 0].reshape(-1, n, n, t.shape[-1]).permute(0, 3, 1, 2)
    x = F.conv2d(x, pool.weight.detach().to(F64), None, pool.stride, pool.padding, 1, pool.groups)
    x = x.reshape(B, a.num_heads, t.shape[-1], -1).transpose(2, 3)
    return layer_norm(x, norm)[:, None]


def mvit_site(a: Any) -> Site:
    from timm.models.mvitv2 import cal_rel_pos_type

    w, heads = stacked(a), int(a.num_heads)

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return tuple(pooled(a, r, split(linear(x, w[r]), heads)) for r in "qkv")  # type: ignore[return-value]

    def probs(q: Tensor, k: Tensor) -> Tensor:
        logits = (q * a.scale) @ k.transpose(-1, -2)
        qs, ks = [side(q)] * 2, [side(k)] * 2
        rel = (a.rel_pos_h.detach().to(F64), a.rel_pos_w.detach().to(F64))
        logits = cal_rel_pos_type(logits[:, 0], q[:, 0], a.has_cls_token, qs, ks, *rel)[:, None]
        return logits.softmax(dim=-1)

    def extra(x: Tensor) -> Tensor:  # residual pooling: the pooled q is added to P·V
        return attend(x)[0].transpose(2, 3).flatten(-2)

    return Site(a, a.proj, w, heads, attend=attend, probs=probs, extra=extra if a.residual_pooling else None)


def mvit_points(m: Any) -> tuple[Point, list[Point]]:
    names = ["stages.0.blocks.0", "stages.1.blocks.0"]
    return (names[0], "in", tokens), [(n, "in", tokens) for n in names]


def mvit_sites(m: Any) -> list[Site]:
    return [mvit_site(s.blocks[0].attn) for s in m.stages]


# ------------------------------------------------------------------------ Hiera: mask units, q max-pooled


def hiera() -> nn.Module:
    kw = dict(img_size=(64, 64), embed_dim=16, num_heads=1, stages=(1, 1), q_pool=1, mask_unit_size=(4, 4))
    return tiny(create("hiera_tiny_224", mask_unit_attn=(True, False), global_pos_size=(16, 16), **kw))


def hiera_site(a: Any) -> Site:
    w, heads, d = stacked(a), int(a.heads), int(a.head_dim)

    def attend(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y = linear(x[:, 0], (a.qkv.weight.T, a.qkv.bias))  # (B, N, 3·H·d)
        units = y.shape[1] // (a.q_stride * a.window_size) if a.use_mask_unit_attn else 1
        q, k, v = y.reshape(B, -1, units, 3, heads, d).permute(3, 0, 2, 4, 1, 5).unbind(0)  # (B, G, H, n, d)
        if a.q_stride > 1:
            q = q.reshape(B, units, heads, a.q_stride, -1, d).amax(dim=3)
        return q, k, v

    def merge(o: Tensor) -> Tensor:  # (B, G, H, n, d) → the module's (B, N, H·d) order, n outermost
        return o.permute(0, 3, 1, 2, 4).reshape(B, 1, -1, heads * d)

    return Site(a, a.proj, w, heads, attend=attend, merge=merge, probs=softmax_probs)


def hiera_points(m: Any) -> tuple[Point, list[Point]]:
    return ("blocks.0", "in", tokens), [("blocks.0", "in", tokens), ("blocks.1", "in", tokens)]


# --------------------------------------------------------------- MaxViT: block and grid attention (NHWC)


def maxvit() -> nn.Module:
    from timm.models import maxxvit

    base = maxxvit.model_cfgs["maxvit_tiny_tf"]
    attn = dataclasses.replace(base.transformer_cfg, dim_head=8, window_size=(4, 4), grid_size=(4, 4))
    cfg = dataclasses.replace(base, embed_dim=(16, 32), depths=(1, 1), stem_width=16, transformer_cfg=attn)
    model = tiny(lambda: maxxvit.MaxxVit(cfg=cfg, img_size=32, num_classes=4))
    for m in model.modules():  # its SDPA kernel sums P·V differently: 2e-5 off on a cancelling entry
        if isinstance(getattr(m, "fused_attn", None), bool):
            m.fused_attn = False
    return model


def maxvit_probs(a: Any, q: Tensor, k: Tensor) -> Tensor:
    n = q.shape[-2]
    return softmax_probs(q, k, a.rel_pos.get_bias().reshape(-1, n, n))


def maxvit_points(m: Any) -> tuple[Point, list[Point]]:
    names = [f"stages.{s}.blocks.0.attn_{p}" for s in range(2) for p in ("block", "grid")]
    return (names[0], "in", nhwc_tokens), [(n, "in", nhwc_tokens) for n in names]


def maxvit_sites(m: Any) -> list[Site]:
    blocks = [s.blocks[0] for s in m.stages]
    attns = [p.attn for b in blocks for p in (b.attn_block, b.attn_grid)]
    return [Site(a, a.proj, stacked(a), int(a.num_heads), probs=partial(maxvit_probs, a)) for a in attns]
