"""Tiny random-init timm models of each family (ViT, DeiT, Swin, XCiT, DaViT) and what the tests know about
them without condcli: X, X_l and A_l from the model's own modules called without hooks (or timm's
``forward_intermediates``), and float64 formulas for P, the attention output and the W slices.

Fused attention is switched ON in every case, so that condcli has to turn it off (to see P) and back on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import timm
import torch
from torch import nn

from condcli.adapters import adapter_for
from condcli.adapters.base import Adapter, HeadWeights
from condcli.inputs.batches import Batch

B = 2
LAM = 10.0
QKV_GAIN = 5.0

# name → (timm model, kwargs, image size)
CASES: dict[str, tuple[str, dict[str, Any], int]] = {
    "vit": ("vit_tiny_patch16_224", dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2), 32),
    "deit": (
        "deit_tiny_distilled_patch16_224",
        dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2),
        32,
    ),
    # 16×16 then 8×8 maps in 4×4 windows; blocks alternate plain / shifted
    "swin": (
        "swin_tiny_patch4_window7_224",
        dict(img_size=32, patch_size=2, embed_dim=16, depths=(2, 2), num_heads=(2, 4), window_size=4),
        32,
    ),
    # a 6×6 map in 4×4 windows: zero padding to 8×8, and a shift mask over the padded map
    "swin_pad": (
        "swin_tiny_patch4_window7_224",
        dict(img_size=24, patch_size=4, embed_dim=16, depths=(2,), num_heads=(2,), window_size=4),
        24,
    ),
    "xcit": (
        "xcit_nano_12_p16_224",
        dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, cls_attn_layers=1),
        32,
    ),
    # 8×8 then 4×4 maps in 3×3 windows: both padded (to 9×9 and 6×6)
    "davit": ("davit_tiny", dict(depths=(1, 1), embed_dims=(16, 32), num_heads=(2, 4), window_size=3), 32),
    "davit_v2": (
        "davit_tiny",
        dict(
            depths=(1, 1),
            embed_dims=(16, 32),
            num_heads=(2, 4),
            window_size=3,
            channel_attn_v2=True,
            named_blocks=True,
        ),
        32,
    ),
}
FAMILY = {
    "vit": "timm-vit",
    "deit": "timm-vit",
    "swin": "timm-swin",
    "swin_pad": "timm-swin",
    "xcit": "timm-xcit",
    "davit": "timm-davit",
    "davit_v2": "timm-davit",
}


@dataclass
class LayerRef:
    """What the test itself knows about one attention layer (found by walking the timm model)."""

    name: str
    attn: nn.Module
    kind: str  # "softmax" (tokens/windows), "xca", "channel_v1", "channel_v2"
    qkv: nn.Linear
    proj: nn.Linear
    bias: torch.Tensor | None = None  # (H, n, n) Swin relative position bias
    mask: torch.Tensor | None = None  # (G, n, n) Swin shift mask
    temperature: torch.Tensor | None = None  # (H,) XCA


@dataclass
class Refs:
    """Everything the test computes itself, without hooks, for one model and one batch."""

    layers: list[LayerRef]
    x: torch.Tensor  # (B, N, d) X
    x_layers: list[torch.Tensor]  # X_l (B, N_l, d_l)
    a_layers: list[torch.Tensor]  # A_l (B, G, n, c)
    consumer: nn.Module  # the first module that consumes X (a pre-hook on it sees X in args[0])
    consumer_tokens: Callable[[torch.Tensor], torch.Tensor]  # its input → (B, N, d)


@dataclass
class Case:
    key: str
    model: Any  # a timm model (untyped internals)
    adapter: Adapter
    batch: Batch
    ref: Refs


# ---------------------------------------------------------------------------------------------- helpers


def flag_modules(model: nn.Module) -> list[Any]:
    """Every module with a ``fused_attn`` switch (typed Any: the flag is a plain attribute)."""
    return [m for m in model.modules() if isinstance(getattr(m, "fused_attn", None), bool)]


def nchw_tokens(x: torch.Tensor) -> torch.Tensor:
    b, c = x.shape[:2]
    return x.reshape(b, c, -1).permute(0, 2, 1)


def nhwc_tokens(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0], x.shape[1] * x.shape[2], x.shape[3])


def windows(x: torch.Tensor, wh: int, ww: int) -> torch.Tensor:
    """(B, H, W, C) → zero-pad to whole windows → (B, nW, wh·ww, C), windows in row-major order."""
    b, h, w, c = x.shape
    ph, pw = -h % wh, -w % ww
    x = torch.cat([x, x.new_zeros(b, ph, w, c)], dim=1) if ph else x
    x = torch.cat([x, x.new_zeros(b, h + ph, pw, c)], dim=2) if pw else x
    hp, wp = h + ph, w + pw
    x = x.reshape(b, hp // wh, wh, wp // ww, ww, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, (hp // wh) * (wp // ww), wh * ww, c)


def close(actual: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    torch.testing.assert_close(
        actual.detach().to(torch.float64), expected.detach().to(torch.float64), rtol=rtol, atol=atol
    )


@contextmanager
def recording(modules: list[nn.Module]) -> Iterator[list[torch.Tensor | None]]:
    """The test's own forward hooks: the output of each module in one forward pass."""
    seen: list[torch.Tensor | None] = [None] * len(modules)
    handles = []
    for i, mod in enumerate(modules):

        def hook(_m: nn.Module, _a: Any, out: Any, i: int = i) -> None:
            seen[i] = out.detach()

        handles.append(mod.register_forward_hook(hook))
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def heads(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """(B, G, n, c) float64 · (H, c, d_h) (+ (H, d_h)) → (B, G, H, n, d_h)."""
    out = torch.einsum("bgnc,hcd->bghnd", a, w)
    return out if b is None else out + b[:, None, :]


def ref_probs(ref: LayerRef, a: torch.Tensor, w: HeadWeights) -> torch.Tensor:
    """P recomputed in float64 from A_l and the per-head W_Q, W_K (+ biases) with the family's formula."""
    q, k = heads(a, w.wq, w.bq), heads(a, w.wk, w.bk)
    n, dh = float(q.shape[-2]), float(q.shape[-1])
    logits: torch.Tensor
    if ref.kind == "softmax":
        logits = q @ k.transpose(-1, -2) * dh**-0.5
        if ref.bias is not None:
            logits = logits + ref.bias.to(torch.float64)
        if ref.mask is not None:
            logits = logits + ref.mask.to(torch.float64)[None, :, None]
    elif ref.kind == "xca":  # q, k L2-normalised over the tokens, times a per-head temperature
        assert ref.temperature is not None
        qn = q / q.norm(dim=-2, keepdim=True)
        kn = k / k.norm(dim=-2, keepdim=True)
        logits = qn.transpose(-1, -2) @ kn * ref.temperature.to(torch.float64)[:, None, None]
    elif ref.kind == "channel_v1":  # DaViT ChannelAttention: softmax(kᵀ v / √d_h) (W_Q, W_K by role)
        logits = q.transpose(-1, -2) @ k * dh**-0.5
    else:  # DaViT ChannelAttentionV2 (dynamic scale): softmax(qᵀ k / √N)
        logits = q.transpose(-1, -2) @ k * n**-0.5
    return logits.softmax(dim=-1)


def ref_output(ref: LayerRef, p: torch.Tensor, a: torch.Tensor, w: HeadWeights) -> torch.Tensor:
    """The attention module's output rebuilt from P and V = A_l W_V + b_V: (B, G, n, C)."""
    v = heads(a, w.wv, w.bv)  # (B, G, H, n, d_h)
    if ref.kind == "softmax":
        o = p @ v  # P mixes tokens
    else:
        o = (p @ v.transpose(-1, -2)).transpose(-1, -2)  # P mixes channels
    b, g, h, n, dh = o.shape
    o = o.permute(0, 1, 3, 2, 4).reshape(b, g, n, h * dh)
    wp = ref.proj.weight.detach().to(torch.float64)
    bp = ref.proj.bias.detach().to(torch.float64) if ref.proj.bias is not None else 0.0
    return o @ wp.T + bp


def expected_slices(ref: LayerRef) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
    """W (d × H·d_h) and b for the roles q, k, v, straight from the module's qkv Linear."""
    wt, bias = ref.qkv.weight.detach(), ref.qkv.bias
    d = wt.shape[0] // 3
    parts: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}
    for i, name in enumerate("qkv"):
        parts[name] = (
            wt[i * d : (i + 1) * d].T,
            None if bias is None else bias.detach()[i * d : (i + 1) * d],
        )
    if ref.kind == "channel_v1":  # P = softmax(kᵀ v) applied to q: by role Q ← k, K ← v, V ← q
        parts = {"q": parts["k"], "k": parts["v"], "v": parts["q"]}
    return parts


# --------------------------------------------------------------------------- per-family references


def _vit(m: Any, img: torch.Tensor) -> Refs:
    x = m._pos_embed(m.patch_embed(img))
    inter = m.forward_intermediates(img, return_prefix_tokens=True, output_fmt="NLC", intermediates_only=True)
    x_layers = [x] + [torch.cat([prefix, spatial], dim=1) for spatial, prefix in inter[:-1]]
    refs = [
        LayerRef(f"blocks.{i}", b.attn, "softmax", b.attn.qkv, b.attn.proj) for i, b in enumerate(m.blocks)
    ]
    a_layers = [
        b.norm1(m.norm_pre(xl) if i == 0 else xl)[:, None]
        for i, (b, xl) in enumerate(zip(m.blocks, x_layers, strict=True))
    ]
    return Refs(refs, x, x_layers, a_layers, m.blocks[0], lambda t: t)


def _swin(m: Any, img: torch.Tensor) -> Refs:
    x = m.patch_embed(img)  # (B, H, W, C)
    x_ref = nhwc_tokens(x)
    refs, x_layers, a_layers = [], [], []
    for s, stage in enumerate(m.layers):
        x = stage.downsample(x)
        for j, blk in enumerate(stage.blocks):
            x_layers.append(nhwc_tokens(x))
            y = blk.norm1(x)
            sh, sw = blk.shift_size
            if sh or sw:
                y = torch.roll(y, shifts=(-sh, -sw), dims=(1, 2))
            a_layers.append(windows(y, *blk.window_size))
            refs.append(
                LayerRef(
                    f"layers.{s}.blocks.{j}",
                    blk.attn,
                    "softmax",
                    blk.attn.qkv,
                    blk.attn.proj,
                    bias=blk.attn._get_rel_pos_bias()[0].detach(),
                    mask=blk.attn_mask,
                )
            )
            x = blk(x)
    return Refs(refs, x_ref, x_layers, a_layers, m.layers[0].blocks[0], nhwc_tokens)


def _xcit(m: Any, img: torch.Tensor) -> Refs:
    tokens, (hp, wp) = m.patch_embed(img)
    x = tokens + nchw_tokens(m.pos_embed(img.shape[0], hp, wp))
    x_ref = x
    refs, x_layers, a_layers = [], [], []
    for i, blk in enumerate(m.blocks):
        x_layers.append(x)
        a_layers.append(blk.norm1(x)[:, None])
        refs.append(
            LayerRef(
                f"blocks.{i}",
                blk.attn,
                "xca",
                blk.attn.qkv,
                blk.attn.proj,
                temperature=blk.attn.temperature.detach().reshape(-1),
            )
        )
        x = blk(x, hp, wp)
    return Refs(refs, x_ref, x_layers, a_layers, m.blocks[0], lambda t: t)


def _davit(m: Any, img: torch.Tensor) -> Refs:
    from timm.models.davit import ChannelAttentionV2, SpatialBlock

    x = m.stem(img)  # (B, C, H, W)
    first = m.stages[0].blocks[0][0]
    x_ref = nchw_tokens(first.cpe1(x))
    refs, x_layers, a_layers = [], [], []
    for s, stage in enumerate(m.stages):
        x = stage.downsample(x)
        for p, pair in enumerate(stage.blocks):
            for child, blk in pair.named_children():
                h, w = x.shape[-2:]
                shortcut = nchw_tokens(blk.cpe1(x))
                x_layers.append(shortcut)
                y = blk.norm1(shortcut)
                if isinstance(blk, SpatialBlock):
                    a_layers.append(windows(y.reshape(y.shape[0], h, w, -1), *blk.window_size))
                    kind = "softmax"
                else:
                    a_layers.append(y[:, None])
                    kind = "channel_v2" if isinstance(blk.attn, ChannelAttentionV2) else "channel_v1"
                refs.append(
                    LayerRef(f"stages.{s}.blocks.{p}.{child}", blk.attn, kind, blk.attn.qkv, blk.attn.proj)
                )
                x = blk(x)
    return Refs(refs, x_ref, x_layers, a_layers, first.norm1, lambda t: t)


BUILDERS: dict[str, Callable[[Any, torch.Tensor], Refs]] = {
    "vit": _vit,
    "deit": _vit,
    "swin": _swin,
    "swin_pad": _swin,
    "xcit": _xcit,
    "davit": _davit,
    "davit_v2": _davit,
}


def make_case(key: str) -> Case:
    name, kwargs, size = CASES[key]
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10, **kwargs).eval()
    with torch.no_grad():  # random init attends almost uniformly: make P, biases and temperature matter
        for path, mod in model.named_modules():
            if path.endswith("qkv") and isinstance(mod, nn.Linear):
                mod.weight.mul_(QKV_GAIN)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.5)
            if path.endswith("attn") and isinstance(getattr(mod, "temperature", None), nn.Parameter):
                mod.temperature.uniform_(0.5, 3.0)
            if path.endswith("attn") and isinstance(
                getattr(mod, "relative_position_bias_table", None), nn.Parameter
            ):
                mod.relative_position_bias_table.normal_(0.0, 1.0)
    for mod in flag_modules(model):
        mod.fused_attn = True  # condcli must turn these off to see P, and restore them
    img = torch.randn(B, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        refs = BUILDERS[key](model, img)
    batch = Batch(inputs={"pixel_values": img}, lengths=None, names=[f"img{i}" for i in range(B)])
    return Case(key, model, adapter_for(model), batch, refs)
