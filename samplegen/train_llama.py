"""The sample LLM: a small Llama-style decoder (RoPE, grouped-query attention, RMSNorm, SwiGLU) on docstrings.

It reads the corpus as gpt2-docstrings does (the same byte-level BPE, trained on the training split), but in
long blocks: every block is ``<|endoftext|>`` (the BOS, as a Llama prompt starts with one) followed by
``block − 1`` tokens of the docstrings joined by ``<|endoftext|>``, so training sees every position up to
``block`` (1,024) and a BOS at position 0. Its tokenizer adds the BOS to every text, as Llama tokenizers do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from samplegen.common import deterministic, fit
from samplegen.text_tokenizers import GPT2_SPECIAL, byte_level_bpe
from samplegen.train_lm import token_loss


@dataclass(frozen=True)
class LlamaRecipe:
    """Everything that decides the weights of the sample LLM."""

    vocab_size: int = 4096
    hidden: int = 128
    layers: int = 4
    heads: int = 4  # query heads
    kv_heads: int = 2  # grouped-query attention: two query heads read each KV head
    intermediate: int = 256  # SwiGLU width
    block: int = 1024  # tokens per training block, BOS included: the context the model is trained at
    rope_theta: float = 10_000.0
    tie_embeddings: bool = True  # the output head is the embedding table (as small Llamas do)
    epochs: int = 1  # one pass (≈ 185 steps): the sample is built in a few CPU minutes
    batch_size: int = 2  # blocks per step: 2,048 tokens
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 20
    seed: int = 0


def tokenizer(texts: Sequence[str], recipe: LlamaRecipe) -> Any:
    """gpt2-docstrings' byte-level BPE, reading ``recipe.block`` tokens and adding the BOS to every text."""
    from tokenizers import processors

    tok = byte_level_bpe(texts, recipe.vocab_size)
    bos = tok.bos_token_id
    tok.backend_tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{GPT2_SPECIAL} $A",
                pair=f"{GPT2_SPECIAL} $A {GPT2_SPECIAL} $B",
                special_tokens=[(GPT2_SPECIAL, bos)],
            ),
        ]
    )
    tok.model_max_length = recipe.block
    return tok


def pack(tok: Any, texts: Sequence[str], block: int) -> torch.Tensor:
    """(blocks, ``block``) token ids: BOS, then ``block − 1`` tokens of the texts joined by EOS (= BOS)."""
    ids: list[int] = []
    for text in texts:
        ids += tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    body = block - 1
    n = len(ids) // body
    bos = torch.full((n, 1), tok.bos_token_id, dtype=torch.long)
    return torch.cat([bos, torch.tensor(ids[: n * body], dtype=torch.long).view(n, body)], dim=1)


def create(recipe: LlamaRecipe, tok: Any) -> nn.Module:
    """LlamaForCausalLM from a config (no dropout, no biases, as Llama)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=recipe.hidden,
        intermediate_size=recipe.intermediate,
        num_hidden_layers=recipe.layers,
        num_attention_heads=recipe.heads,
        num_key_value_heads=recipe.kv_heads,
        max_position_embeddings=recipe.block,
        rope_theta=recipe.rope_theta,
        tie_word_embeddings=recipe.tie_embeddings,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model: nn.Module = LlamaForCausalLM(config)
    return model


@torch.no_grad()
def evaluate(model: nn.Module, blocks: torch.Tensor) -> dict[str, float]:
    """Held-out next-token loss in nats per scored token (every position after the first), in batches of 4."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(blocks), 4):
        ids = blocks[i : i + 4]
        logits = model(input_ids=ids).logits.double()
        scored = ids[:, 1:].numel()
        total += float(token_loss(logits, ids, "gpt2")) * scored
        count += scored
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(loss), "tokens_scored": count}


def train(
    recipe: LlamaRecipe, tok: Any, texts: Sequence[str], log: Any = print
) -> tuple[nn.Module, dict[str, Any]]:
    """Train the sample LLM on ``texts``; returns the model and what happened."""
    deterministic(recipe.seed)
    model = create(recipe, tok)
    data = pack(tok, texts, recipe.block)

    def batch_loss(idx: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        ids = data[idx]
        return token_loss(model(input_ids=ids).logits, ids, "gpt2")

    run = fit(model, len(data), batch_loss, recipe, log)
    return model, run | {
        "recipe": asdict(recipe),
        "train_blocks": len(data),
        "train_tokens": int(data.numel()),
    }
