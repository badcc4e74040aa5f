"""Conformance cases for Hugging Face encoders of no family of their own (family "generic").

ALBERT (shared layers, inner groups too: each call its own layer, in call order), DeBERTa-v2
(disentangled relative attention, as DeBERTa-v3 configures it), ModernBERT (rotary, fused ``Wqkv``,
alternating global and local layers), T5 as an encoder (T5EncoderModel, and the encoder of a full T5Model
as condcli analyses it), and Whisper's audio encoder on log-mel features (synthetic: random numbers of the
features' shape, labelled so here). DistilBERT is in tests/families.py. References are the model's own
``hidden_states`` (ALBERT's: one per block call) and ``output_attentions`` under eager attention; W is each
module's own weight, transposed (fused ``Wqkv``: its rows [Q | K | V], as ModernBertAttention views its
output (.., 3, H, d_h)).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import transformers as tf
from torch import nn

from condcli.inputs.batches import Batch
from condcli.loading.hf import analysed_module
from tests.families import INIT, LAYERS, VOCAB, B, Case, Site, tokens

D, H = 32, 4
T = 7  # tokens per sample; the second sample is padded to it from 4
IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


def seeded(model: nn.Module) -> nn.Module:
    """``model`` in eval mode with its norm weights and its biases moved off their init (ones, zeros)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.5)
    return model.eval()


def linear_site(a: Any, proj: nn.Module, q: nn.Linear, k: nn.Linear, v: nn.Linear) -> Site:
    w = {r: (lin.weight.T, lin.bias) for r, lin in zip("qkv", (q, k, v), strict=True)}
    return Site(a, proj, w, H)


# ------------------------------------------------------------------------------------------------ ALBERT


def albert(layers: int = 3, groups: int = 1, inner: int = 1) -> nn.Module:
    """``groups`` groups of ``inner`` blocks serve ``layers`` layers: group g runs for a run of consecutive
    layers, its blocks in turn each time (each call a layer of its own)."""
    torch.manual_seed(0)
    config = tf.AlbertConfig(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=D,
        num_hidden_layers=layers,
        num_hidden_groups=groups,
        inner_group_num=inner,
        num_attention_heads=H,
        intermediate_size=64,
        initializer_range=INIT,
    )
    return seeded(tf.AlbertModel(config))


def albert_sites(m: Any) -> list[Site]:
    """One site per call of a shared block (the same module at each of its calls), in call order."""
    c = m.config
    per = c.num_hidden_layers // c.num_hidden_groups  # AlbertTransformer: group = layer // (L / G)
    sites = []
    for layer in range(c.num_hidden_layers):
        for block in m.encoder.albert_layer_groups[layer // per].albert_layers:
            a = block.attention
            sites.append(linear_site(a, a.dense, a.query, a.key, a.value))
    return sites


# --------------------------------------------------------------------------------------------- DeBERTa-v2


def deberta() -> nn.Module:
    """DeBERTa-v3's attention: relative c2p and p2c terms from shared q/k projections; no absolute
    positions."""
    torch.manual_seed(0)
    config = tf.DebertaV2Config(
        vocab_size=VOCAB,
        hidden_size=D,
        num_hidden_layers=LAYERS,
        num_attention_heads=H,
        intermediate_size=64,
        initializer_range=INIT,
        relative_attention=True,
        position_biased_input=False,
        pos_att_type=["p2c", "c2p"],
        share_att_key=True,
        position_buckets=4,
        max_relative_positions=8,
        norm_rel_ebd="layer_norm",
        **IDS,
    )
    return seeded(tf.DebertaV2Model(config))


def deberta_sites(m: Any) -> list[Site]:
    return [
        linear_site(s, layer.attention.output.dense, s.query_proj, s.key_proj, s.value_proj)
        for layer in m.encoder.layer
        for s in [layer.attention.self]
    ]


# -------------------------------------------------------------------------------------------- ModernBERT


def modernbert() -> nn.Module:
    """Three layers: global, local (±2 tokens, shorter than the batch), global."""
    torch.manual_seed(0)
    config = tf.ModernBertConfig(
        vocab_size=VOCAB,
        hidden_size=D,
        num_hidden_layers=3,
        num_attention_heads=H,
        intermediate_size=64,
        initializer_range=INIT,
        global_attn_every_n_layers=2,
        local_attention=4,
        cls_token_id=1,
        sep_token_id=2,
        **IDS,
    )
    return seeded(tf.ModernBertModel(config))


def modernbert_sites(m: Any) -> list[Site]:
    sites = []
    for layer in m.layers:
        a = layer.attn
        w = a.Wqkv.weight.T.chunk(3, dim=1)  # (d, 3·H·d_h) → [Q | K | V]
        b = a.Wqkv.bias.chunk(3) if a.Wqkv.bias is not None else (None, None, None)
        sites.append(Site(a, a.Wo, {r: (w[i], b[i]) for i, r in enumerate("qkv")}, H))
    return sites


# --------------------------------------------------------------------------------------------------- T5

T5_CONFIG = dict(vocab_size=VOCAB, d_model=D, d_kv=8, d_ff=64, num_layers=LAYERS, num_heads=H)


def t5_encoder() -> nn.Module:
    """A T5EncoderModel folder's class: its relative position bias is computed in the first layer."""
    torch.manual_seed(0)
    return seeded(tf.T5EncoderModel(tf.T5Config(**T5_CONFIG, initializer_factor=INIT * 10, **IDS)))


def t5_full_encoder() -> nn.Module:
    """A full T5Model as condcli analyses it: its encoder stack alone (condcli.loading.hf)."""
    torch.manual_seed(0)
    full = tf.T5Model(tf.T5Config(**T5_CONFIG, initializer_factor=INIT * 10, **IDS))
    return seeded(analysed_module(full)[0])


def t5_sites(m: Any) -> list[Site]:
    stack = m.encoder if hasattr(m, "encoder") else m
    return [
        linear_site(a, a.o, a.q, a.k, a.v) for a in (block.layer[0].SelfAttention for block in stack.block)
    ]


# ---------------------------------------------------------------------------------------------- Whisper

MELS, FRAMES = 8, 16  # mel bins; encoder positions (2·FRAMES feature frames, halved by the second conv)


def whisper_encoder() -> nn.Module:
    """A WhisperModel as condcli analyses it: its audio encoder alone."""
    torch.manual_seed(0)
    config = tf.WhisperConfig(
        vocab_size=VOCAB,
        d_model=D,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=H,
        decoder_attention_heads=H,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_mel_bins=MELS,
        max_source_positions=FRAMES,
        max_target_positions=FRAMES,
        init_std=INIT,
        decoder_start_token_id=1,
        **IDS,
    )
    return seeded(analysed_module(tf.WhisperModel(config))[0])


def synthetic_log_mel() -> Batch:
    """Synthetic log-mel features (seeded standard normal numbers, not audio) of the encoder's input shape."""
    features = torch.randn(B, MELS, 2 * FRAMES, generator=torch.Generator().manual_seed(1))
    return Batch({"input_features": features}, None, ["synthetic0", "synthetic1"])


def whisper_sites(m: Any) -> list[Site]:
    return [
        linear_site(a, a.out_proj, a.q_proj, a.k_proj, a.v_proj)
        for a in (layer.self_attn for layer in m.layers)
    ]


# ------------------------------------------------------------------------------------------ the table

batch = partial(tokens, [T, 4], T)

CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "albert_shared": Case(albert, batch, albert_sites),
        "albert_inner_groups": Case(partial(albert, 2, 1, 2), batch, albert_sites),
        "albert_two_groups_of_two": Case(partial(albert, 4, 2, 2), batch, albert_sites),
        "deberta_v2_disentangled": Case(deberta, batch, deberta_sites),
        "modernbert_local_global": Case(modernbert, batch, modernbert_sites),
        "t5_encoder_model": Case(t5_encoder, batch, t5_sites),
        "t5_full_model_encoder": Case(t5_full_encoder, batch, t5_sites),
        "whisper_audio_encoder": Case(whisper_encoder, synthetic_log_mel, whisper_sites),
    }
}
