"""Hugging Face BERT / RoBERTa and their layout twins: post-norm encoder, bidirectional softmax attention.

Covered: BertModel, RobertaModel, XLMRobertaModel, CamembertModel, Data2VecTextModel, ErnieModel and
ElectraModel, with any task head on top (the base is found through ``model.base_model``). In transformers
5.x all of them share one self-attention forward (``<X>SelfAttention`` with separate ``query/key/value``
nn.Linear) that returns ``(attn_output, attn_weights)``; with the eager implementation ``attn_weights``
is the post-softmax P itself, so P is read from that output without asking for ``output_attentions``
(which would make transformers install hooks of its own that stay on the model).

Blocks are post-norm: X_l, the input of ``encoder.layer[l]``, is also the attention input A_l.
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
    separate_qkv,
)
from condcli.adapters.hf_common import attention_weights, base_model, is_hf, is_hf_instance, module_path

# base-model class → (transformers module, family key); all share BertSelfAttention's forward verbatim.
_FAMILIES: dict[str, tuple[str, str]] = {
    "BertModel": ("bert.modeling_bert", "hf-bert"),
    "ErnieModel": ("ernie.modeling_ernie", "hf-bert"),
    "ElectraModel": ("electra.modeling_electra", "hf-bert"),
    "RobertaModel": ("roberta.modeling_roberta", "hf-roberta"),
    "XLMRobertaModel": ("xlm_roberta.modeling_xlm_roberta", "hf-roberta"),
    "CamembertModel": ("camembert.modeling_camembert", "hf-roberta"),
    "Data2VecTextModel": ("data2vec.modeling_data2vec_text", "hf-roberta"),
}


def _family_of(model: nn.Module) -> str | None:
    for name, (module, family) in _FAMILIES.items():
        if is_hf_instance(model, module, name):
            return family
    return None


def matches(model: nn.Module) -> bool:
    if not is_hf(model) or _family_of(model) is None:
        return False
    base: Any = base_model(model)
    try:
        layers = list(base.encoder.layer)
    except AttributeError:
        return False
    return bool(layers) and all(
        isinstance(getattr(getattr(layer.attention, "self", None), "query", None), nn.Linear)
        for layer in layers
    )


def _weights(attn: Any) -> HeadWeights:
    return separate_qkv(attn.query, attn.key, attn.value, int(attn.num_attention_heads))


def build(model: nn.Module) -> Adapter:
    family = _family_of(model) or "hf-bert"
    base: Any = base_model(model)
    config: Any = base.config
    causal = bool(getattr(config, "is_decoder", False))
    label = "causal softmax over tokens" if causal else "softmax over tokens (bidirectional)"
    notes: list[str] = []
    position = getattr(config, "position_embedding_type", "absolute")
    if position not in (None, "absolute"):
        notes.append(f"config asks for position_embedding_type={position!r}; this version adds absolute ones")
    layers: list[LayerSpec] = []
    for i, layer in enumerate(base.encoder.layer):
        attn = layer.attention.self
        layers.append(
            LayerSpec(
                index=i,
                name=module_path(model, layer),
                attention=label,
                heads=int(attn.num_attention_heads),
                x_in=Probe(layer, first_input, after=False),
                attn_in=Probe(attn, one_group, after=False),  # post-norm: A_l is X_l
                probs=Probe(attn, attention_weights, after=True),
                weights=partial(_weights, attn),
            )
        )
    point: nn.Module = base.embeddings
    description = "output of embeddings (word + position + token type embeddings, after LayerNorm)"
    project = getattr(base, "embeddings_project", None)
    if isinstance(project, nn.Module):  # ELECTRA with embedding_size ≠ hidden_size
        point = project
        description = "output of embeddings_project (embeddings after LayerNorm, projected to hidden size)"
        notes.append("X is taken after embeddings_project, the first-block input (embedding_size ≠ hidden)")
    return Adapter(
        family=family,
        model=model,
        embedding=EmbeddingPoint(point, module_path(model, point), description),
        layers=tuple(layers),
        input_kind="text",
        notes=tuple(notes),
    )
