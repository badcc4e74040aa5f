"""Tiny random Hugging Face models of each family (BERT/RoBERTa, GPT-2, ViT, Nyströmformer) built from
configs under ``torch.manual_seed(0)``, their inputs, and references that are the models' own outputs
(``output_hidden_states``, ``output_attentions`` from an eager run) or explicit float64 recomputations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import transformers as tf
from torch import nn

from condcli.adapters.base import Adapter, HeadWeights
from condcli.capture import capture
from condcli.inputs.batches import Batch
from tests.recording import hook_count

D, H, LAYERS, VOCAB, SEG = 32, 4, 2, 100, 64
INIT = 0.3  # weight scale: peaked, far-from-uniform attention (0.02, the default, gives P ≈ 1/n everywhere)
SMALL: dict[str, Any] = {
    "vocab_size": VOCAB,
    "hidden_size": D,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": H,
    "intermediate_size": 64,
    "initializer_range": INIT,
}


# ---------------------------------------------------------------------------------------------- builders


def _bert() -> nn.Module:
    return tf.BertModel(tf.BertConfig(**SMALL))


def _roberta() -> nn.Module:
    return tf.RobertaForSequenceClassification(tf.RobertaConfig(**SMALL))


def _gpt2() -> nn.Module:
    return tf.GPT2LMHeadModel(
        tf.GPT2Config(
            n_embd=D,
            n_layer=LAYERS,
            n_head=H,
            vocab_size=VOCAB,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=0,
            initializer_range=INIT,
        )
    )


def _vit() -> nn.Module:
    return tf.ViTForImageClassification(
        tf.ViTConfig(
            image_size=32,
            patch_size=8,
            hidden_size=D,
            num_hidden_layers=LAYERS,
            num_attention_heads=H,
            intermediate_size=64,
            num_labels=3,
            initializer_range=INIT,
        )
    )


def _nystrom(landmarks: int, head: bool) -> nn.Module:
    config = tf.NystromformerConfig(
        segment_means_seq_len=SEG,
        num_landmarks=landmarks,
        max_position_embeddings=SEG + 2,
        conv_kernel_size=5,
        **SMALL,
    )
    return tf.NystromformerForMaskedLM(config) if head else tf.NystromformerModel(config)


BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "bert": _bert,
    "roberta": _roberta,
    "gpt2": _gpt2,
    "vit": _vit,
    "nys_approx": lambda: _nystrom(8, head=False),
    "nys_exact": lambda: _nystrom(SEG, head=True),
}
FAMILY = {
    "bert": "hf-bert",
    "roberta": "hf-roberta",
    "gpt2": "hf-gpt2",
    "vit": "hf-vit",
    "nys_approx": "hf-nystromformer",
    "nys_exact": "hf-nystromformer",
}
TEXT_SOFTMAX = ["bert", "roberta", "gpt2"]


def build(name: str) -> nn.Module:
    torch.manual_seed(0)
    return BUILDERS[name]().eval()


def pad_id(model: nn.Module) -> int:
    pid = getattr(getattr(model, "config", None), "pad_token_id", None)
    return int(pid) if pid is not None else 0


def text_batch(model: nn.Module, lengths: list[int], total: int | None = None, seed: int = 1) -> Batch:
    """Random token ids (≥ 5, so never a special id), right-padded to ``total`` with the model's pad id."""
    n = total or max(lengths)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (len(lengths), n), generator=gen)
    mask = torch.zeros(len(lengths), n, dtype=torch.long)
    for b, length in enumerate(lengths):
        mask[b, :length] = 1
        ids[b, length:] = pad_id(model)
    padded = any(length < n for length in lengths)
    return Batch({"input_ids": ids, "attention_mask": mask}, mask.sum(1) if padded else None, ["a", "b"])


def batch_for(name: str, model: nn.Module, padded: bool = False) -> Batch:
    if name == "vit":
        gen = torch.Generator().manual_seed(2)
        return Batch({"pixel_values": torch.randn(2, 3, 32, 32, generator=gen)}, None, ["a", "b"])
    if name.startswith("nys"):
        return text_batch(model, [SEG, 41] if padded else [SEG, SEG], SEG)
    return text_batch(model, [9, 5] if padded else [9, 9])


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = 2e-5, rtol: float = 1e-5) -> None:
    """Equal to float32 resolution (captured float32 activations against float64 references)."""
    torch.testing.assert_close(actual.to(expected.dtype), expected, atol=atol, rtol=rtol)


def blocks(name: str, model: Any) -> list[Any]:
    base = model.base_model
    if name == "gpt2":
        return list(base.h)
    if name == "vit":
        return list(base.layers)
    return list(base.encoder.layer)


def self_attention(name: str, block: Any) -> Any:
    return block.attn if name == "gpt2" else block.attention if name == "vit" else block.attention.self


def reference(model: nn.Module, batch: Batch, **flags: bool) -> Any:
    """The model's own forward with HF's output flags (eager attention for ``output_attentions``)."""
    m: Any = model
    impl = m.config._attn_implementation
    if flags.get("output_attentions"):
        m.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            return model(**batch.inputs, **flags)
    finally:
        if flags.get("output_attentions"):
            m.set_attn_implementation(impl)


def run_capture(adapter: Adapter, batch: Batch, **kwargs: Any) -> Any:
    model: Any = adapter.model
    before, impl = hook_count(model), model.config._attn_implementation
    cap = capture(adapter, batch, **kwargs)
    assert hook_count(model) == before, "capture left hooks on the model"
    assert model.config._attn_implementation == impl
    return cap


def explicit_probs(
    a: torch.Tensor, w: HeadWeights, lengths: torch.Tensor | None, causal: bool
) -> torch.Tensor:
    """softmax(q kᵀ/√d_h + mask) in float64 from a captured A_l (B, 1, n, d) → (B, H, n, n)."""
    A = a[:, 0].to(torch.float64)
    q = torch.einsum("bnd,hde->bhne", A, w.wq)
    k = torch.einsum("bnd,hde->bhne", A, w.wk)
    if w.bq is not None and w.bk is not None:
        q = q + w.bq[None, :, None, :]
        k = k + w.bk[None, :, None, :]
    scores = q @ k.transpose(-1, -2) / math.sqrt(w.wq.shape[-1])
    n = scores.shape[-1]
    blocked = torch.zeros(A.shape[0], 1, n, n, dtype=torch.bool)
    if lengths is not None:
        blocked |= torch.arange(n)[None, None, None, :] >= lengths[:, None, None, None]
    if causal:
        blocked |= torch.ones(n, n, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(blocked, -math.inf), dim=-1)


def head_values(a: torch.Tensor, w: HeadWeights) -> torch.Tensor:
    v = torch.einsum("bnd,hde->bhne", a[:, 0].to(torch.float64), w.wv)
    return v if w.bv is None else v + w.bv[None, :, None, :]
