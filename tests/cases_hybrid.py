"""Conformance cases of issue 29, points 3-5 (family "generic"): what is attention, P on request, modules
re-created inside forward, and a gated mix.

- Jamba, an attention block then a Mamba block: one layer, the attention; the Mamba mixer's fused
  ``in_proj`` is not read as Q/K/V.
- MPNet returns its weights only ``if output_attentions``.
- GPT-OSS adds a learned sink and drops its column: P's rows sum to less than 1 (P·V still checked).
- BigBird (block_sparse) switches to full attention inside its forward on a short input and re-creates its
  attention modules around the same q, k, v: the test's own hooks sit on the stable parent
  (``BigBirdAttention``, whose input is A_l) and on the output dense layer.
- ConViT: GPSA's P is the content softmax (a float64 recomputation from ``qk``), and what multiplies V is
  the gated mix (``Site.post``, the test's own formula); its second block is a plain MHSA.
References: HF ``hidden_states`` / ``output_attentions`` under eager attention; ConViT's modules in order.
"""

from __future__ import annotations

from typing import Any

import timm
import torch
import transformers as tf
from torch import nn

from tests.families import INIT, QKV_GAIN, VOCAB, Case, Site, fused, images, softmax_probs, tokens

D, H, KV = 32, 4, 2
T = 7
F64 = torch.float64
Tensor = torch.Tensor


def seeded(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and p.ndim == 1:
                p.normal_(0.0, 0.5)
    return model.eval()


def separate(a: Any, proj: nn.Module, q: nn.Linear, k: nn.Linear, v: nn.Linear, kv: int = H) -> Site:
    w = {r: (lin.weight.T, lin.bias) for r, lin in zip("qkv", (q, k, v), strict=True)}
    return Site(a, proj, w, H, kv_heads=None if kv == H else kv)


# ------------------------------------------------------------------------------------------------ Jamba


def jamba() -> nn.Module:
    torch.manual_seed(0)
    config = tf.JambaConfig(
        vocab_size=VOCAB,
        hidden_size=D,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=H,
        num_key_value_heads=KV,
        attn_layer_period=2,
        attn_layer_offset=0,  # layer 0 attention, layer 1 Mamba
        expert_layer_period=100,
        expert_layer_offset=99,
        num_experts=1,
        mamba_d_state=4,
        mamba_d_conv=4,
        mamba_expand=2,
        initializer_range=INIT,
        pad_token_id=0,
    )
    return tf.JambaModel(config).eval()


def jamba_sites(m: Any) -> list[Site]:
    a = m.layers[0].self_attn
    return [separate(a, a.o_proj, a.q_proj, a.k_proj, a.v_proj, KV)]


# ------------------------------------------------------------------------------------------------ MPNet


def mpnet() -> nn.Module:
    torch.manual_seed(0)
    config = tf.MPNetConfig(
        vocab_size=VOCAB,
        hidden_size=D,
        num_hidden_layers=2,
        num_attention_heads=H,
        intermediate_size=64,
        initializer_range=INIT,
    )
    return seeded(tf.MPNetModel(config))


def mpnet_sites(m: Any) -> list[Site]:
    return [separate(a, a.o, a.q, a.k, a.v) for a in (layer.attention.attn for layer in m.encoder.layer)]


# ---------------------------------------------------------------------------------------------- GPT-OSS


def gpt_oss() -> nn.Module:
    torch.manual_seed(0)
    config = tf.GptOssConfig(
        vocab_size=VOCAB,
        hidden_size=D,
        intermediate_size=D,
        num_hidden_layers=2,
        num_attention_heads=H,
        num_key_value_heads=KV,
        head_dim=D // H,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=4,
        initializer_range=INIT,
        pad_token_id=0,
    )
    return tf.GptOssModel(config).eval()


def gpt_oss_sites(m: Any) -> list[Site]:
    attns = (layer.self_attn for layer in m.layers)
    return [separate(a, a.o_proj, a.q_proj, a.k_proj, a.v_proj, KV) for a in attns]


# ---------------------------------------------------------------------------------------------- BigBird


def bigbird() -> nn.Module:
    torch.manual_seed(0)
    config = tf.BigBirdConfig(
        vocab_size=VOCAB,
        hidden_size=D,
        num_hidden_layers=2,
        num_attention_heads=H,
        intermediate_size=64,
        attention_type="block_sparse",  # switched to original_full inside forward: T ≤ (5 + 2·2)·2 tokens
        block_size=2,
        num_random_blocks=2,
        initializer_range=INIT,
    )
    return seeded(tf.BigBirdModel(config))


def bigbird_sites(m: Any) -> list[Site]:
    """Hooks on BigBirdAttention (stable; its input is A_l) and its output dense layer (its input is P·V);
    the weights of q, k, v, which the re-created attention keeps."""
    sites = []
    for layer in m.encoder.layer:
        a, s = layer.attention, layer.attention.self
        sites.append(separate(a, a.output.dense, s.query, s.key, s.value))
    return sites


# ----------------------------------------------------------------------------------------------- ConViT


def convit() -> nn.Module:
    torch.manual_seed(0)
    kw = dict(img_size=32, patch_size=8, embed_dim=D, depth=2, num_heads=H, local_up_to_layer=1)
    model = timm.create_model("convit_tiny", pretrained=False, num_classes=4, **kw).eval()
    with torch.no_grad():
        model.blocks[0].attn.qk.weight.mul_(QKV_GAIN)
        model.blocks[0].attn.gating_param.uniform_(-1.0, 1.0)
        model.blocks[1].attn.qkv.weight.mul_(QKV_GAIN)
    return model


def convit_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = pos_drop(patch_embed + pos_embed); X_1 = [cls | block 0's output] (the class token enters at
    local_up_to_layer = 1)."""
    x = m.pos_drop(m.patch_embed(img) + m.pos_embed)
    after = m.blocks[0](x)
    m.forward_features(img)  # the whole forward, for the test's hooks on every attention
    return x, [x, torch.cat((m.cls_token.expand(x.shape[0], -1, -1), after), dim=1)]


def gated_mix(a: Any, p: Tensor) -> Tensor:
    """GPSA's mix of P (B, G, H, N, N) with its positional softmax, by the test's own float64 formula."""
    n = p.shape[-1]
    side = int(n**0.5)
    idx = torch.arange(side, dtype=F64)
    ind = idx.view(1, -1) - idx.view(-1, 1)
    dx, dy = ind.repeat(side, side), ind.repeat_interleave(side, 0).repeat_interleave(side, 1)
    rel = torch.stack((dx, dy, dx**2 + dy**2), -1)  # (N, N, 3)
    scores = rel @ a.pos_proj.weight.detach().to(F64).T + a.pos_proj.bias.detach().to(F64)
    pos = scores.permute(2, 0, 1).softmax(-1)  # (H, N, N)
    g = torch.sigmoid(a.gating_param.detach().to(F64)).view(-1, 1, 1)
    mix = (1 - g) * p + g * pos
    return mix / mix.sum(-1, keepdim=True)


def convit_sites(m: Any) -> list[Site]:
    a = m.blocks[0].attn
    wq, wk = a.qk.weight.chunk(2, dim=0)
    w = {"q": (wq.T, None), "k": (wk.T, None), "v": (a.v.weight.T, a.v.bias)}
    gpsa = Site(a, a.proj, w, H, probs=softmax_probs, post=lambda p: gated_mix(a, p))
    return [gpsa, fused(m.blocks[1].attn)]


batch = lambda: tokens([T, T], T)  # noqa: E731  (BigBird switches on the unpadded short input too)

CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "jamba_attention_then_mamba": Case(jamba, batch, jamba_sites),
        "mpnet_weights_on_request": Case(mpnet, batch, mpnet_sites),
        "gpt_oss_sink_dropped": Case(gpt_oss, batch, gpt_oss_sites),
        "bigbird_switches_to_full_inside_forward": Case(bigbird, batch, bigbird_sites),
        "convit_gated_mix": Case(convit, images, convit_sites, convit_layers),
    }
}
