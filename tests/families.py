"""The conformance table: one tiny random-init model per adapter family, and where its references are.

``CASES`` maps every name in ``condcli.adapters.FAMILIES`` to its variants; tests/test_conformance.py runs
every contract check on each. A variant declares how to build the model (seeded, 2 layers or so, d ≤ 32,
attention sharpened so that P is informative), a small batch, where the test finds each attention layer in
the model itself (:class:`Site`: the attention module, its output projection, its weights split as
docs/math.md#layers says, and the family's P as a float64 function of q and k), and how X and X_l come from
the model's own modules (timm: called in order, or ``forward_intermediates``; HF: ``hidden_states`` of an
eager run). A new family adds its variants here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import timm
import torch
import transformers as tf
from torch import nn

from condcli.inputs.batches import Batch

B = 2  # samples per batch
D, HEADS, LAYERS, VOCAB = 32, 4, 2, 64  # HF width, heads, layers, vocabulary
INIT = 0.3  # HF weight scale: peaked attention (the default 0.02 gives P ≈ 1/n everywhere)
QKV_GAIN = 5.0  # timm: the same, by scaling the qkv weights of a default init
F64 = torch.float64
Tensor = torch.Tensor
Weights = dict[str, tuple[Tensor, Tensor | None]]  # role → (d × H·d_h weight, (H·d_h,) bias or None)


@dataclass(frozen=True)
class Site:
    """One attention layer as the test finds it in the model itself (never through condcli)."""

    attn: nn.Module  # its first input is A_l: (B·G, n, c), windows with the batch outermost
    proj: nn.Module | None  # its input is the attention output before the projection, heads side by side
    # (None: the module has no output projection; its own output is that)
    w: Weights  # the module's own projection weights, split as docs/math.md#layers says (y = A_l W + b)
    heads: int
    mixing: str = "tokens"  # "channels": P (d_h × d_h) mixes V's channels (XCA, DaViT channel attention)
    probs: Callable[[Tensor, Tensor], Tensor] | None = None  # float64 P from per-head q, k (B, G, H, n, d_h)
    extra: Callable[[Tensor], Tensor] | None = None  # what the module adds to P·V before proj, from A_l
    post: Callable[[Tensor], Tensor] | None = None  # what the module does to P before it multiplies V
    # (CaiT's talking heads mix the heads of the softmax): P (B, G, H, q, k) float64 → the same shape
    kv_heads: int | None = None  # grouped-query attention: heads of w["k"], w["v"] (None: ``heads``)
    # where Q or K/V are not A_l's tokens projected (spatial reduction, pooling, class attention, windows the
    # module makes itself): A_l (B, G, n, c) → the per-head q, k, v float64 the module attends with,
    # (B, G', H, ·, d_h) each (None: A_l projected by ``w``)
    attend: Callable[[Tensor], tuple[Tensor, Tensor, Tensor]] | None = None
    merge: Callable[[Tensor], Tensor] | None = None  # P·V (B, G', H, q, d_v) → what the output projection
    # receives, (B, G'', n, H·d_v) (None: the heads side by side)

    def role_heads(self, role: str) -> int:
        """Heads of the role's projection: H for Q, H_kv for K and V under grouped-query attention."""
        return self.heads if role == "q" or self.kv_heads is None else self.kv_heads


Layers = Callable[[Any, Tensor], tuple[Tensor, list[Tensor]]]  # (model, pixels) → X, [X_l]


@dataclass(frozen=True)
class Case:
    build: Callable[[], nn.Module]  # seeded tiny random-init model in eval mode
    batch: Callable[[], Batch]
    sites: Callable[[Any], list[Site]]  # one per adapter layer, in the adapter's order
    layers: Layers | None = None  # X and X_l from the model's own modules; None: HF hidden_states (eager)
    observable: bool = True  # the family observes P: every LayerSpec.probs is set (False: every one is None)


# ---------------------------------------------------------------------------------------------- helpers


def project(a: Tensor, site: Site, role: str) -> Tensor:
    """A_l (B, G, n, c) → the role's per-head projection (B, G, H, n, d_h) in float64, from ``site.w``
    (under grouped-query attention each query head gets the KV head it reads, h // (H / H_kv))."""
    w, b = site.w[role]
    y = a.to(F64) @ w.detach().to(F64)
    if b is not None:
        y = y + b.detach().to(F64)
    heads = site.role_heads(role)
    y = y.unflatten(-1, (heads, -1)).transpose(-2, -3)
    return y.repeat_interleave(site.heads // heads, dim=-3)


def softmax_probs(q: Tensor, k: Tensor, bias: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
    """softmax(q kᵀ/√d_h [+ bias (H, n, n)] [+ mask (G, n, n)]) per group and head."""
    logits = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if bias is not None:
        logits = logits + bias.detach().to(F64)
    if mask is not None:
        logits = logits + mask.detach().to(F64)[None, :, None]
    return logits.softmax(dim=-1)


def images(size: int = 32) -> Batch:
    pixels = torch.randn(B, 3, size, size, generator=torch.Generator().manual_seed(1))
    return Batch({"pixel_values": pixels}, None, [f"img{i}" for i in range(B)])


def tokens(lengths: list[int], total: int) -> Batch:
    """Random ids ≥ 5 (never a special id), right-padded with id 0 (BERT's pad id) to ``total``."""
    ids = torch.randint(5, VOCAB, (len(lengths), total), generator=torch.Generator().manual_seed(1))
    mask = (torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = ids * mask
    padded = min(lengths) < total
    return Batch({"input_ids": ids, "attention_mask": mask}, mask.sum(1) if padded else None, ["a", "b"])


def nhwc_tokens(x: Tensor) -> Tensor:
    return x.reshape(x.shape[0], -1, x.shape[-1])


def nchw_tokens(x: Tensor) -> Tensor:
    return x.flatten(2).transpose(1, 2)


# ------------------------------------------------------------------------------------------------- timm


def timm_model(name: str, **kwargs: Any) -> nn.Module:
    """A tiny random timm model with peaked attention and fused attention ON (capture must turn it off)."""
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=4, **kwargs).eval()
    with torch.no_grad():
        for path, mod in model.named_modules():
            if path.endswith("qkv") and isinstance(mod, nn.Linear):
                mod.weight.mul_(QKV_GAIN)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.5)
            if isinstance(getattr(mod, "temperature", None), nn.Parameter):
                mod.temperature.uniform_(0.5, 3.0)
            if isinstance(getattr(mod, "relative_position_bias_table", None), nn.Parameter):
                mod.relative_position_bias_table.normal_(0.0, 1.0)
            if isinstance(getattr(mod, "fused_attn", None), bool):
                mod.fused_attn = True
    return model


def fused(a: Any, roles: str = "qkv", mixing: str = "tokens", probs: Any = softmax_probs) -> Site:
    """A timm attention with ``qkv`` (3·d, d) ordered [Q|K|V] and ``proj``; ``roles``: what each block is."""
    w = a.qkv.weight.chunk(3, dim=0)
    b = a.qkv.bias.chunk(3) if a.qkv.bias is not None else (None, None, None)
    parts = {name: (w[i].T, b[i]) for i, name in enumerate("qkv")}
    weights = {role: parts[name] for role, name in zip("qkv", roles, strict=True)}
    return Site(a, a.proj, weights, int(a.num_heads), mixing, probs)


def vit() -> nn.Module:
    return timm_model("vit_tiny_patch16_224", img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2)


def vit_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = pos_drop output (patch embed + class token + pos embed); X_l from forward_intermediates."""
    x = m._pos_embed(m.patch_embed(img))
    inter = m.forward_intermediates(img, return_prefix_tokens=True, output_fmt="NLC", intermediates_only=True)
    return x, [x] + [torch.cat([prefix, spatial], dim=1) for spatial, prefix in inter[:-1]]


def swin() -> nn.Module:  # an 8×8 map in 4×4 windows; the second block is shifted (shift mask)
    kw = dict(img_size=16, patch_size=2, embed_dim=16, depths=(2,), num_heads=(2,), window_size=4)
    return timm_model("swin_tiny_patch4_window7_224", **kw)


def swin_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = patch_embed output (NHWC); X_l: every block's input, the stages called in order."""
    x = m.patch_embed(img)
    x_ref, x_layers = nhwc_tokens(x), []
    for stage in m.layers:
        x = stage.downsample(x)
        for blk in stage.blocks:
            x_layers.append(nhwc_tokens(x))
            x = blk(x)
    return x_ref, x_layers


def swin_probs(blk: Any, q: Tensor, k: Tensor) -> Tensor:
    """Window softmax plus the relative position bias and, in shifted blocks, the shift mask."""
    return softmax_probs(q, k, blk.attn._get_rel_pos_bias()[0], blk.attn_mask)


def swin_sites(m: Any) -> list[Site]:
    return [fused(b.attn, probs=partial(swin_probs, b)) for stage in m.layers for b in stage.blocks]


def xcit() -> nn.Module:
    kw = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, cls_attn_layers=1)
    return timm_model("xcit_nano_12_p16_224", **kw)


def xcit_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = conv patch embedding + Fourier position encoding; X_l: the XCA blocks called in order."""
    x, (hp, wp) = m.patch_embed(img)
    x = x + nchw_tokens(m.pos_embed(img.shape[0], hp, wp))
    x_ref, x_layers = x, []
    for blk in m.blocks:
        x_layers.append(x)
        x = blk(x, hp, wp)
    return x_ref, x_layers


def xca_probs(temperature: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """softmax(q̂ᵀ k̂ · temperature) over channels, q̂ and k̂ L2-normalised over the tokens."""
    qn, kn = nn.functional.normalize(q, dim=-2), nn.functional.normalize(k, dim=-2)
    return (qn.transpose(-1, -2) @ kn * temperature.detach().to(F64).reshape(-1, 1, 1)).softmax(dim=-1)


def xcit_sites(m: Any) -> list[Site]:
    return [fused(b.attn, mixing="channels", probs=partial(xca_probs, b.attn.temperature)) for b in m.blocks]


def davit() -> nn.Module:  # 8×8 then 4×4 maps in 3×3 windows (both zero-padded), channel attention v1
    return timm_model("davit_tiny", depths=(1, 1), embed_dims=(16, 32), num_heads=(2, 4), window_size=3)


def davit_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = the first block's cpe1 output; X_l: each block's cpe1 output, the blocks called in order."""
    x = m.stem(img)
    x_ref, x_layers = nchw_tokens(m.stages[0].blocks[0][0].cpe1(x)), []
    for stage in m.stages:
        x = stage.downsample(x)
        for blk in (b for pair in stage.blocks for b in pair.children()):
            x_layers.append(nchw_tokens(blk.cpe1(x)))
            x = blk(x)
    return x_ref, x_layers


def channel_probs(q: Tensor, k: Tensor) -> Tensor:
    """DaViT ChannelAttention: softmax(qᵀ k / √d_h) over channels (q, k by role: timm's k and v)."""
    return (q.transpose(-1, -2) @ k * q.shape[-1] ** -0.5).softmax(dim=-1)


def davit_sites(m: Any) -> list[Site]:
    from timm.models.davit import SpatialBlock

    blocks = [b for stage in m.stages for pair in stage.blocks for b in pair.children()]
    # ChannelAttention: P = softmax(kᵀv·d_h^-½) applied to q, so by role Q ← k, K ← v, V ← q
    return [
        fused(b.attn) if isinstance(b, SpatialBlock) else fused(b.attn, "kvq", "channels", channel_probs)
        for b in blocks
    ]


# --------------------------------------------------------------------------------------------------- HF

SMALL = dict(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=64)
SMALL.update(initializer_range=INIT)
SEG = 16  # Nyströmformer sequence length; with 4 landmarks P is the approximation, not the exact softmax


def linears(a: Any, proj: nn.Module | None, q: nn.Linear, k: nn.Linear, v: nn.Linear, **kw: Any) -> Site:
    """Separate nn.Linear projections (y = x Wᵀ + b): W is each weight transposed."""
    w = {"q": (q.weight.T, q.bias), "k": (k.weight.T, k.bias), "v": (v.weight.T, v.bias)}
    return Site(a, proj, w, int(getattr(a, "num_attention_heads", 0) or a.num_heads), **kw)


def bert() -> nn.Module:
    torch.manual_seed(0)
    return tf.BertModel(tf.BertConfig(vocab_size=VOCAB, **SMALL)).eval()


def bert_sites(m: Any) -> list[Site]:
    return [
        linears(s, layer.attention.output.dense, s.query, s.key, s.value)
        for layer in m.encoder.layer
        for s in [layer.attention.self]
    ]


def gpt2() -> nn.Module:
    torch.manual_seed(0)
    config = tf.GPT2Config(n_embd=D, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB, initializer_range=INIT)
    return tf.GPT2LMHeadModel(config).eval()


def gpt2_sites(m: Any) -> list[Site]:
    """GPT-2 ``c_attn`` is a Conv1D (d, 3d), y = x W + b: its columns split into [Q|K|V]."""
    sites = []
    for a in (block.attn for block in m.transformer.h):
        w, b = a.c_attn.weight.chunk(3, dim=1), a.c_attn.bias.chunk(3)
        sites.append(Site(a, a.c_proj, {r: (w[i], b[i]) for i, r in enumerate("qkv")}, a.num_heads))
    return sites


def vit_hf() -> nn.Module:
    torch.manual_seed(0)
    return tf.ViTModel(tf.ViTConfig(image_size=32, patch_size=8, **SMALL)).eval()


def vit_hf_sites(m: Any) -> list[Site]:
    return [
        linears(a, a.o_proj, a.q_proj, a.k_proj, a.v_proj) for a in (layer.attention for layer in m.layers)
    ]


def nystromformer() -> nn.Module:
    torch.manual_seed(0)
    kw = dict(segment_means_seq_len=SEG, num_landmarks=4, max_position_embeddings=SEG + 2, conv_kernel_size=5)
    return tf.NystromformerModel(tf.NystromformerConfig(vocab_size=VOCAB, **kw, **SMALL)).eval()


def nystrom_probs(attn: Any, q: Tensor, k: Tensor) -> Tensor:
    """kernel_1 · iterative_inv(kernel_2) · kernel_3 in float64 (q, k scaled by d_h^-¼ each, landmarks the
    segment means), with the module's own iterative_inv run on the float64 kernel."""
    q, k = q / q.shape[-1] ** 0.25, k / k.shape[-1] ** 0.25
    segments = (attn.num_landmarks, q.shape[-2] // attn.num_landmarks)
    q_land, k_land = q.unflatten(-2, segments).mean(-2), k.unflatten(-2, segments).mean(-2)
    kernel_1 = (q @ k_land.transpose(-1, -2)).softmax(-1)
    kernel_2 = (q_land @ k_land.transpose(-1, -2)).softmax(-1)
    kernel_3 = (q_land @ k.transpose(-1, -2)).softmax(-1)
    return kernel_1 @ attn.iterative_inv(kernel_2) @ kernel_3


def nystrom_conv(attn: Any, site: Site, a: Tensor) -> Tensor:
    """The depthwise convolution of V along the sequence that the module adds to P·V: (B, 1, n, H·d_h)."""
    v = project(a, site, "v")[:, 0]  # (B, H, n, d_h)
    weight = attn.conv.weight.detach().to(F64)
    out = nn.functional.conv2d(v, weight, padding=attn.conv.padding, groups=site.heads)
    return out.transpose(1, 2).flatten(-2)[:, None]


def nystrom_sites(m: Any) -> list[Site]:
    sites = []
    for layer in m.encoder.layer:
        s = layer.attention.self
        site = linears(s, layer.attention.output.dense, s.query, s.key, s.value)
        sites.append(replace(site, probs=partial(nystrom_probs, s), extra=partial(nystrom_conv, s, site)))
    return sites


# ------------------------------------------------------------------------------------------ the table

CASES: dict[str, dict[str, Case]] = {
    "timm_vit": {"vit": Case(vit, images, lambda m: [fused(b.attn) for b in m.blocks], vit_layers)},
    "timm_swin": {"swin": Case(swin, partial(images, 16), swin_sites, swin_layers)},
    "timm_xcit": {"xcit": Case(xcit, images, xcit_sites, xcit_layers)},
    "timm_davit": {"davit": Case(davit, images, davit_sites, davit_layers)},
    "hf_bert": {"bert": Case(bert, partial(tokens, [7, 4], 7), bert_sites)},
    "hf_gpt2": {"gpt2": Case(gpt2, partial(tokens, [7, 4], 7), gpt2_sites)},
    "hf_vit": {"vit": Case(vit_hf, images, vit_hf_sites)},
    # the output projection receives P·V plus a depthwise convolution of V (Site.extra)
    "hf_nystromformer": {
        "nystromformer": Case(nystromformer, partial(tokens, [SEG, SEG], SEG), nystrom_sites)
    },
}
