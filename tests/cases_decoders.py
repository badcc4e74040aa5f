"""Conformance cases for Hugging Face decoder LLMs (family "generic": no adapter module of their own).

Each is a tiny random-init base model (d = 32, 4 query heads, 2 layers; ``AutoModel.from_config`` of the
family's config, as condcli analyses a CausalLM folder's base model) with its characteristic feature turned
on: grouped-query attention, a sliding window shorter than the batch, q/k/v biases, q/k norms, partial
rotary, alternating local and global layers, fused projections, ALiBi, mixture-of-experts MLPs. References
are the model's own ``hidden_states`` and ``output_attentions`` under eager attention (tests/families.py),
and each Site's W is read from the module by hand: separate projections transposed, fused ones split the
way the family's forward splits its output (Phi-3 by offsets, GPT-NeoX/Bloom per head, Falcon by its own
``_split_heads``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import transformers as tf
from torch import nn

from tests.families import INIT, LAYERS, VOCAB, Case, Site, tokens

D, H, KV, DH = 32, 4, 2, 8  # width, query heads, key/value heads under GQA, head width
T = 7  # tokens per sample; the second sample is padded to it from 4
WINDOW = 3  # sliding window (keys), shorter than T so that the local mask shows
COMMON: dict[str, Any] = {
    "vocab_size": VOCAB,
    "hidden_size": D,
    "intermediate_size": 64,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": H,
    "initializer_range": INIT,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def base_model(config: Any) -> nn.Module:
    """The family's base model (what condcli analyses under a CausalLM head), seeded, eval mode, with its
    norm weights moved off their identity init so that A_l differs from a plain normalised X_l."""
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):  # zero at init: give q/k/v biases something to check
                p.normal_(0.0, 0.5)
    return model


def hf(config_cls: Any, **kw: Any) -> Callable[[], nn.Module]:
    return partial(lambda: base_model(config_cls(**{**COMMON, **kw})))


def blocks(m: Any) -> list[Any]:
    """The decoder layers: ``layers``, ``h`` or ``decoder.layers``."""
    for path in ("layers", "h", "decoder.layers"):
        try:
            return list(m.get_submodule(path))
        except AttributeError:
            continue
    raise AssertionError(f"no decoder layers in {type(m).__name__}")


def separate(m: Any, heads: int = H, kv: int = H, attn: str = "self_attn", out: str = "o_proj") -> list[Site]:
    """Llama-style q_proj/k_proj/v_proj (y = x Wᵀ + b): W is each weight transposed; K, V of ``kv`` heads."""
    sites = []
    for block in blocks(m):
        a = getattr(block, attn)
        w = {
            r: (lin.weight.T, lin.bias) for r, lin in zip("qkv", (a.q_proj, a.k_proj, a.v_proj), strict=True)
        }
        sites.append(Site(a, getattr(a, out), w, heads, kv_heads=kv))
    return sites


def rows_split(
    a: Any,
    lin: nn.Linear,
    split: Callable[[torch.Tensor], tuple[torch.Tensor, ...]],
    kv: int,
    out: str | None = None,
) -> Site:
    """A fused projection's W per role: the family's own split applied to Wᵀ (the output for x = I_d) and
    to the bias (the output for x = 0), heads side by side."""
    wt = lin.weight.T  # (d, rows)
    w_parts = split(wt)
    b_parts = split(lin.bias[None]) if lin.bias is not None else (None, None, None)
    w = {
        r: (wp.flatten(1), None if bp is None else bp.flatten())
        for r, wp, bp in zip("qkv", w_parts, b_parts, strict=True)
    }
    proj = getattr(a, out) if out is not None else a.dense if hasattr(a, "dense") else a.o_proj
    return Site(a, proj, w, H, kv_heads=kv)


def phi3_sites(m: Any) -> list[Site]:
    """Phi3Attention.forward: qkv[..., :H·d_h], then H_kv·d_h for K, the rest for V."""

    def split(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return t[..., : H * DH], t[..., H * DH : (H + KV) * DH], t[..., (H + KV) * DH :]

    return [rows_split(b.self_attn, b.self_attn.qkv_proj, split, KV) for b in blocks(m)]


def neox_sites(m: Any) -> list[Site]:
    """GPTNeoXAttention / BloomAttention: view(..., H, 3·d_h) and q, k, v of each head side by side."""

    def split(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, k, v = t.unflatten(-1, (H, 3 * DH)).chunk(3, dim=-1)
        return tuple(x.flatten(-2) for x in (q, k, v))

    attn = "attention" if hasattr(blocks(m)[0], "attention") else "self_attention"
    return [rows_split(getattr(b, attn), getattr(b, attn).query_key_value, split, H) for b in blocks(m)]


def falcon_sites(m: Any, kv: int) -> list[Site]:
    """FalconAttention: its own ``_split_heads`` of the fused output, (.., T, heads, d_h) per role;
    multi-query gives K and V one head each."""

    def split(a: Any, t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q, k, v = a._split_heads(t[None])  # (1, n, heads, d_h)
        return tuple(x[0, :, : (H if x is q else kv)].flatten(-2) for x in (q, k, v))

    return [
        rows_split(b.self_attention, b.self_attention.query_key_value, partial(split, b.self_attention), kv)
        for b in blocks(m)
    ]


def codegen_sites(m: Any) -> list[Site]:
    """CodeGenAttention.forward: qkv.view(..., mp_num, 3·local).split(local) gives query, VALUE, key, each
    reshaped to (..., H, d_h) across the shards."""

    def split(a: Any, t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        local = D // a.mp_num
        q, v, k = t.unflatten(-1, (a.mp_num, 3 * local)).split(local, dim=-1)
        return tuple(x.flatten(-2) for x in (q, k, v))

    return [rows_split(b.attn, b.attn.qkv_proj, partial(split, b.attn), H, "out_proj") for b in blocks(m)]


def codegen() -> nn.Module:
    config = tf.CodeGenConfig(
        vocab_size=VOCAB,
        n_embd=D,
        n_layer=LAYERS,
        n_head=H,
        rotary_dim=4,
        n_positions=64,
        initializer_range=INIT,
    )
    return base_model(config)


def persimmon_sites(m: Any) -> list[Site]:
    """PersimmonAttention._split_heads: view(..., H, 3, d_h), each head's q, k, v side by side."""

    def split(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = t.unflatten(-1, (H, 3, DH))
        return tuple(r[..., i, :].flatten(-2) for i in range(3))

    return [rows_split(b.self_attn, b.self_attn.query_key_value, split, H) for b in blocks(m)]


def bigcode_sites(m: Any, multi_query: bool) -> list[Site]:
    """GPTBigCodeAttention.forward: multi-query splits c_attn's output (d, d_h, d_h) into q and ONE shared k
    and v head; else view(..., H, 3·d_h).split(d_h), each head's q, k, v side by side."""

    def split(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if multi_query:
            return t.split((D, DH, DH), dim=-1)
        q, k, v = t.unflatten(-1, (H, 3 * DH)).split(DH, dim=-1)
        return tuple(x.flatten(-2) for x in (q, k, v))

    kv = 1 if multi_query else H
    return [rows_split(b.attn, b.attn.c_attn, split, kv, "c_proj") for b in blocks(m)]


def bigcode(multi_query: bool) -> Callable[[], nn.Module]:
    config = tf.GPTBigCodeConfig(
        vocab_size=VOCAB, n_embd=D, n_layer=LAYERS, n_head=H, multi_query=multi_query, initializer_range=INIT
    )
    return partial(base_model, config)


def falcon(**kw: Any) -> Callable[[], nn.Module]:
    small = {k: COMMON[k] for k in ("vocab_size", "hidden_size", "num_attention_heads", "initializer_range")}
    return partial(lambda: base_model(tf.FalconConfig(**small, num_hidden_layers=LAYERS, bias=True, **kw)))


def bloom() -> nn.Module:
    config = tf.BloomConfig(vocab_size=VOCAB, hidden_size=D, n_layer=LAYERS, n_head=H, initializer_range=INIT)
    return base_model(config)


def opt() -> nn.Module:
    config = tf.OPTConfig(
        vocab_size=VOCAB,
        hidden_size=D,
        num_hidden_layers=LAYERS,
        ffn_dim=64,
        num_attention_heads=H,
        word_embed_proj_dim=D,
        init_std=INIT,
    )
    return base_model(config)


def gptj() -> nn.Module:
    config = tf.GPTJConfig(
        vocab_size=VOCAB, n_embd=D, n_layer=LAYERS, n_head=H, rotary_dim=4, initializer_range=INIT
    )
    return base_model(config)


batch = partial(tokens, [T, 4], T)
GQA = {"num_key_value_heads": KV}
SLIDING = {"sliding_window": WINDOW}
ALTERNATING = {"layer_types": ["sliding_attention", "full_attention"], **SLIDING}


def case(build: Callable[[], nn.Module], sites: Callable[[Any], list[Site]]) -> Case:
    return Case(build, batch, sites)


CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "llama": case(hf(tf.LlamaConfig), separate),
        "llama_gqa": case(hf(tf.LlamaConfig, **GQA), partial(separate, kv=KV)),
        # SmolLM is a Llama config with three query heads per KV head and tied embeddings
        "smollm": case(
            hf(tf.LlamaConfig, hidden_size=48, num_attention_heads=6, **GQA, tie_word_embeddings=True),
            partial(separate, heads=6, kv=KV),
        ),
        "mistral_sliding": case(hf(tf.MistralConfig, **GQA, **SLIDING), partial(separate, kv=KV)),
        "qwen2_bias": case(hf(tf.Qwen2Config, **GQA), partial(separate, kv=KV)),
        "qwen3_qk_norm": case(hf(tf.Qwen3Config, **GQA, head_dim=DH), partial(separate, kv=KV)),
        # SmolLM3: its second layer has no rotary position embedding at all (NoPE)
        "smollm3_nope": case(hf(tf.SmolLM3Config, **GQA, no_rope_layers=[1, 0]), partial(separate, kv=KV)),
        "olmo": case(hf(tf.OlmoConfig), separate),
        "olmo2_qk_norm": case(hf(tf.Olmo2Config), separate),
        "granite": case(hf(tf.GraniteConfig, **GQA, embedding_multiplier=2.0), partial(separate, kv=KV)),
        "cohere": case(hf(tf.CohereConfig, **GQA), partial(separate, kv=KV)),
        "stablelm_partial_rotary": case(hf(tf.StableLmConfig, num_key_value_heads=H), separate),
        "starcoder2": case(hf(tf.Starcoder2Config, **GQA, **SLIDING), partial(separate, kv=KV)),
        "phi2_partial_rotary": case(
            hf(tf.PhiConfig, partial_rotary_factor=0.5), partial(separate, out="dense")
        ),
        "gemma": case(hf(tf.GemmaConfig, num_key_value_heads=H, head_dim=DH), separate),
        "gemma2": case(hf(tf.Gemma2Config, **GQA, head_dim=DH, **ALTERNATING), partial(separate, kv=KV)),
        "gemma3": case(hf(tf.Gemma3TextConfig, **GQA, head_dim=DH, **ALTERNATING), partial(separate, kv=KV)),
        "phi3_fused": case(hf(tf.Phi3Config, **GQA), phi3_sites),
        "gpt_neox_fused": case(hf(tf.GPTNeoXConfig), neox_sites),
        "falcon_multi_query": case(falcon(multi_query=True), partial(falcon_sites, kv=1)),
        "bloom_alibi": case(bloom, neox_sites),
        # fused layouts as transformers' forwards split them: sharded [q|v|k], per head, multi-query
        "codegen_sharded_qvk": case(codegen, codegen_sites),
        "persimmon_per_head": case(
            hf(tf.PersimmonConfig, partial_rotary_factor=0.5, qk_layernorm=True), persimmon_sites
        ),
        "gpt_bigcode_multi_query": case(bigcode(True), partial(bigcode_sites, multi_query=True)),
        "gpt_bigcode_multi_head": case(bigcode(False), partial(bigcode_sites, multi_query=False)),
        "opt": case(opt, partial(separate, out="out_proj")),
        "gptj": case(gptj, partial(separate, attn="attn", out="out_proj")),
        "mixtral_moe": case(
            hf(tf.MixtralConfig, **GQA, **SLIDING, num_local_experts=2, num_experts_per_tok=1),
            partial(separate, kv=KV),
        ),
        "qwen2_moe": case(
            hf(
                tf.Qwen2MoeConfig,
                **GQA,
                num_experts=2,
                num_experts_per_tok=1,
                moe_intermediate_size=16,
                shared_expert_intermediate_size=16,
            ),
            partial(separate, kv=KV),
        ),
        "qwen3_moe": case(
            hf(
                tf.Qwen3MoeConfig,
                **GQA,
                head_dim=DH,
                num_experts=2,
                num_experts_per_tok=1,
                moe_intermediate_size=16,
            ),
            partial(separate, kv=KV),
        ),
    }
}
