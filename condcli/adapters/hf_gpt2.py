"""Hugging Face GPT-2 (GPT2Model, GPT2LMHeadModel and the other heads): pre-norm, causal softmax attention.

X is the output of ``transformer.drop`` (wte + wpe [+ token-type embeddings]) = ``hidden_states[0]``.
A_l is ``ln_1``'s output, i.e. the input of ``h[l].attn``. The projections are one Conv1D ``c_attn`` with
weight (d, 3d) used as y = x W + b: columns [Q|K|V], heads contiguous inside each third. In transformers
5.x GPT2Attention returns ``(attn_output, attn_weights)``; under the eager implementation (also its
``reorder_and_upcast_attn`` path) ``attn_weights`` is the causal post-softmax P.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import nn

from condcli.adapters.base import (
    Adapter,
    EmbeddingPoint,
    HeadWeights,
    LayerSpec,
    Probe,
    first_input,
    one_group,
    split_bias,
    split_heads,
)
from condcli.adapters.hf_common import (
    attention_weights,
    base_model,
    is_hf,
    is_hf_instance,
    module_path,
)


def matches(model: nn.Module) -> bool:
    if not is_hf(model):
        return False
    if not is_hf_instance(model, "gpt2.modeling_gpt2", "GPT2Model"):
        return False
    base: Any = base_model(model)
    return all(hasattr(block.attn, "c_attn") and not block.attn.is_cross_attention for block in base.h)


def _weights(attn: Any) -> HeadWeights:
    d = int(attn.embed_dim)
    heads = int(attn.num_heads)
    w = attn.c_attn.weight  # Conv1D: (d, 3d), y = x @ w + b
    b = attn.c_attn.bias
    return HeadWeights(
        split_heads(w[:, :d], heads),
        split_heads(w[:, d : 2 * d], heads),
        split_heads(w[:, 2 * d :], heads),
        split_bias(b[:d], heads),
        split_bias(b[d : 2 * d], heads),
        split_bias(b[2 * d :], heads),
    )


def build(model: nn.Module) -> Adapter:
    base: Any = base_model(model)
    config: Any = base.config
    notes: list[str] = []
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        notes.append("scale_attn_by_inverse_layer_idx: layer l divides its scores by an extra (l + 1)")
    if not getattr(config, "scale_attn_weights", True):
        notes.append("scale_attn_weights is off: scores are q·k without 1/√d_h")
    if getattr(config, "add_cross_attention", False):
        notes.append("cross-attention layers are not analysed; P is the causal self-attention")
    layers: list[LayerSpec] = []
    for i, block in enumerate(base.h):
        attn = block.attn
        layers.append(
            LayerSpec(
                index=i,
                name=module_path(model, block),
                attention="causal softmax over tokens",
                heads=int(attn.num_heads),
                x_in=Probe(block, first_input, after=False),
                attn_in=Probe(attn, one_group, after=False),  # = ln_1 output
                probs=Probe(attn, attention_weights, after=True),
                weights=partial(_weights, attn),
                causal=True,
            )
        )
    return Adapter(
        family="hf-gpt2",
        model=model,
        embedding=EmbeddingPoint(
            base.drop,
            module_path(model, base.drop),
            "output of drop (token embedding wte + position embedding wpe)",
        ),
        layers=tuple(layers),
        input_kind="text",
        notes=tuple(notes),
        forward=lambda inputs: model(**inputs, use_cache=False),
    )
