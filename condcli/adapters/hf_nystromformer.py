"""Hugging Face Nyströmformer: BERT-like post-norm encoder whose attention is a Nyström approximation.

NystromformerSelfAttention scales q and k by d_h^(-1/4) each. With ``num_landmarks == segment_means_seq_len``
it computes the exact softmax(q kᵀ + mask); otherwise, with m landmarks (segment means of q and k),

    P = softmax(q k̃ᵀ) · iterative_inv(softmax(q̃ k̃ᵀ)) · softmax(q̃ kᵀ + mask)        (n × m · m × m · m × n)

and the module applies P to V, then adds a depthwise convolution of V along the sequence (``conv``). The
``attention_probs`` it returns are only the n × m left factor, so P is recomputed here, inside a pre-forward
probe on the self-attention module, from the module's own query/key layers and its own ``iterative_inv``
on the same batch (the "original" inverse initialisation takes a max over the whole batch, so P depends
slightly on which samples share a batch). The convolution term is not part of P.

Sequences must be exactly ``config.segment_means_seq_len`` tokens long (inputs are padded to it).
transformers 5.x expands a 2-D padding mask to (B, 1, n, n), which cannot be added to the (B, H, m, n)
landmark scores (a RuntimeError as soon as a batch has padding); the adapter's forward passes the
equivalent (B, 1, 1, n) additive mask instead, which transformers uses as given.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import torch
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
from condcli.adapters.hf_common import base_model, is_hf, is_hf_instance, module_path


def matches(model: nn.Module) -> bool:
    if not is_hf(model):
        return False
    if not is_hf_instance(model, "nystromformer.modeling_nystromformer", "NystromformerModel"):
        return False
    base: Any = base_model(model)
    return all(hasattr(layer.attention.self, "iterative_inv") for layer in base.encoder.layer)


def nystrom_probs(attn: Any, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The n × n matrix ``attn`` applies to V for input ``hidden`` (B, n, d) → (B, H, n, n).

    The same operations, in the same order and dtype, as NystromformerSelfAttention.forward.
    """
    dh = int(attn.attention_head_size)
    heads = int(attn.num_attention_heads)
    shape = (*hidden.shape[:-1], -1, dh)
    q = attn.query(hidden).view(shape).transpose(1, 2) / math.sqrt(math.sqrt(dh))
    k = attn.key(hidden).view(shape).transpose(1, 2) / math.sqrt(math.sqrt(dh))
    m, n = int(attn.num_landmarks), int(attn.seq_len)
    if m == n:
        scores = torch.matmul(q, k.transpose(-1, -2))
        if mask is not None:
            scores = scores + mask
        return nn.functional.softmax(scores, dim=-1)
    q_land = q.reshape(-1, heads, m, n // m, dh).mean(dim=-2)
    k_land = k.reshape(-1, heads, m, n // m, dh).mean(dim=-2)
    kernel_1 = nn.functional.softmax(torch.matmul(q, k_land.transpose(-1, -2)), dim=-1)
    kernel_2 = nn.functional.softmax(torch.matmul(q_land, k_land.transpose(-1, -2)), dim=-1)
    scores = torch.matmul(q_land, k.transpose(-1, -2))
    if mask is not None:
        scores = scores + mask
    kernel_3 = nn.functional.softmax(scores, dim=-1)
    left = torch.matmul(kernel_1, attn.iterative_inv(kernel_2))
    return torch.matmul(left, kernel_3)


def _probs(attn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    hidden = first_input(args, kwargs, output, batch)
    mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
    return nystrom_probs(attn, hidden, mask if isinstance(mask, torch.Tensor) else None).unsqueeze(1)


def _weights(attn: Any) -> HeadWeights:
    return separate_qkv(attn.query, attn.key, attn.value, int(attn.num_attention_heads))


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, n) 0/1 padding mask → (B, 1, 1, n) additive mask (0 on real tokens, dtype's min on padding)."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


def _forward(model: nn.Module, inputs: dict[str, torch.Tensor]) -> Any:
    kwargs = dict(inputs)
    mask = kwargs.get("attention_mask")
    if mask is not None and mask.ndim == 2 and not bool(mask.bool().all()):
        kwargs["attention_mask"] = additive_mask(mask, next(model.parameters()).dtype)
    return model(**kwargs)


def build(model: nn.Module) -> Adapter:
    base: Any = base_model(model)
    config: Any = base.config
    m, n = int(config.num_landmarks), int(config.segment_means_seq_len)
    approximate = m != n
    label = f"Nyström approximation of softmax ({m} landmarks)" if approximate else "softmax over tokens"
    if not approximate:
        label += " (bidirectional, exact: landmarks = sequence length)"
    notes = [f"inputs must be exactly segment_means_seq_len = {n} tokens (padded to it)"]
    if config.conv_kernel_size is not None:
        notes.append(
            f"each layer also adds a depthwise convolution of V (kernel {config.conv_kernel_size}); "
            "it is not part of P"
        )
    if approximate:
        notes.append("P = kernel_1 · iterative_inv(kernel_2) · kernel_3 (n × n), recomputed from q and k")
        if getattr(base.encoder.layer[0].attention.self, "init_option", "original") == "original":
            notes.append(
                "the model's iterative_inv starts from a max over the whole batch: P and the model's output "
                "change slightly with which samples share a batch (use `batch_size=1` to avoid it)"
            )
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
                probs=Probe(attn, partial(_probs, attn), after=False),
                weights=partial(_weights, attn),
                approximation=approximate,
            )
        )
    return Adapter(
        family="hf-nystromformer",
        model=model,
        embedding=EmbeddingPoint(
            base.embeddings,
            module_path(model, base.embeddings),
            "output of embeddings (word + position + token type embeddings, after LayerNorm)",
        ),
        layers=tuple(layers),
        input_kind="text",
        notes=tuple(notes),
        forward=partial(_forward, model),
    )
