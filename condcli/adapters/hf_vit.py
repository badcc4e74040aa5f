"""Hugging Face ViT (ViTModel, ViTForImageClassification, ViTForMaskedImageModeling): global softmax.

Layout of transformers 5.x: ``vit.embeddings`` then ``vit.layers[l]`` (ViTLayer: ``layernorm_before`` →
``attention`` (ViTAttention with q_proj/k_proj/v_proj/o_proj) → residual → ``layernorm_after`` → MLP).
X is the embeddings output (patch embedding + CLS token + position embedding) = ``hidden_states[0]``;
A_l is ``layernorm_before``'s output, i.e. the input of ``attention``. ViTAttention returns
``(attn_output, attn_weights)``; under the eager implementation ``attn_weights`` is the post-softmax P.
Older layouts (``encoder.layer[l].attention.attention.query``) are left to the generic adapter.
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
from condcli.adapters.hf_common import (
    attention_weights,
    base_model,
    is_hf,
    is_hf_instance,
    module_path,
)


def _blocks(base: Any) -> list[Any]:
    layers = getattr(base, "layers", None)
    return list(layers) if isinstance(layers, nn.ModuleList) else []


def matches(model: nn.Module) -> bool:
    if not is_hf(model):
        return False
    if not is_hf_instance(model, "vit.modeling_vit", "ViTModel"):
        return False
    blocks = _blocks(base_model(model))
    return bool(blocks) and all(
        isinstance(getattr(block.attention, "q_proj", None), nn.Linear) and hasattr(block, "layernorm_before")
        for block in blocks
    )


def _weights(attn: Any) -> HeadWeights:
    return separate_qkv(attn.q_proj, attn.k_proj, attn.v_proj, int(attn.num_attention_heads))


def build(model: nn.Module) -> Adapter:
    base: Any = base_model(model)
    layers: list[LayerSpec] = []
    for i, block in enumerate(_blocks(base)):
        attn = block.attention
        layers.append(
            LayerSpec(
                index=i,
                name=module_path(model, block),
                attention="softmax over all tokens",
                heads=int(attn.num_attention_heads),
                x_in=Probe(block, first_input, after=False),
                attn_in=Probe(attn, one_group, after=False),  # = layernorm_before output
                probs=Probe(attn, attention_weights, after=True),
                weights=partial(_weights, attn),
            )
        )
    return Adapter(
        family="hf-vit",
        model=model,
        embedding=EmbeddingPoint(
            base.embeddings,
            module_path(model, base.embeddings),
            "output of embeddings (patch embedding + class token + position embedding)",
        ),
        layers=tuple(layers),
        input_kind="images",
        forward=lambda inputs: model(pixel_values=inputs["pixel_values"]),
    )
