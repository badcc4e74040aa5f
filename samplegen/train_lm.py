"""The sample language models: a small GPT-2 (causal LM) and a small BERT (masked LM) on stdlib docstrings.

Docstrings are tokenized with the sample's own tokenizer and packed into blocks of ``MAX_LENGTH`` tokens:
GPT-2 blocks are docstrings joined by ``<|endoftext|>``; BERT blocks are ``[CLS] … [SEP]`` around docstrings
joined by ``[SEP]``. BERT masks 15% of the tokens (80% [MASK], 10% random, 10% kept); its held-out masks
come from a fixed seed, so the held-out loss is a number anyone can reproduce from the shipped weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from samplegen.common import deterministic, fit
from samplegen.text_tokenizers import MAX_LENGTH

Kind = Literal["gpt2", "bert"]
IGNORE = -100  # label of a position that is not scored
HELDOUT_MASK_SEED = 1234


@dataclass(frozen=True)
class LmRecipe:
    """Everything that decides the weights of a sample language model."""

    kind: Kind
    vocab_size: int = 4096
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    intermediate: int = 512
    epochs: int = 3
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 50
    mask_prob: float = 0.15  # BERT only
    seed: int = 0


def pack(tokenizer: Any, texts: Sequence[str], kind: Kind) -> torch.Tensor:
    """(blocks, MAX_LENGTH) token ids; the incomplete last block is dropped."""
    ids: list[int] = []
    if kind == "gpt2":
        for text in texts:
            ids += tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        n = len(ids) // MAX_LENGTH
        return torch.tensor(ids[: n * MAX_LENGTH], dtype=torch.long).view(n, MAX_LENGTH)
    for text in texts:
        ids += tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.sep_token_id]
    body = MAX_LENGTH - 2
    n = len(ids) // body
    blocks = torch.tensor(ids[: n * body], dtype=torch.long).view(n, body)
    cls = torch.full((n, 1), tokenizer.cls_token_id)
    sep = torch.full((n, 1), tokenizer.sep_token_id)
    return torch.cat([cls, blocks, sep], dim=1)


def mlm_mask(
    ids: torch.Tensor, tokenizer: Any, prob: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: (inputs, labels) with ``prob`` of the non-special tokens scored."""
    special = torch.tensor(tokenizer.all_special_ids)
    candidates = ~torch.isin(ids, special)
    chosen = (torch.rand(ids.shape, generator=generator) < prob) & candidates
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    roll = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(tokenizer), ids.shape, generator=generator)
    inputs = torch.where(chosen & (roll < 0.8), torch.full_like(ids, tokenizer.mask_token_id), ids)
    inputs = torch.where(chosen & (roll >= 0.8) & (roll < 0.9), random_ids, inputs)
    return inputs, labels


def heldout_batch(
    tokenizer: Any, texts: Sequence[str], recipe: LmRecipe
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) of the held-out set; for BERT the masks come from ``HELDOUT_MASK_SEED``."""
    ids = pack(tokenizer, texts, recipe.kind)
    if recipe.kind == "gpt2":
        return ids, ids
    return mlm_mask(ids, tokenizer, recipe.mask_prob, torch.Generator().manual_seed(HELDOUT_MASK_SEED))


def create(recipe: LmRecipe, tokenizer: Any) -> nn.Module:
    """GPT2LMHeadModel or BertForMaskedLM from a config (dropout off: a short, underfitting run)."""
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    if recipe.kind == "gpt2":
        eos = tokenizer.eos_token_id
        config = GPT2Config(
            vocab_size=len(tokenizer),
            n_positions=MAX_LENGTH,
            n_embd=recipe.hidden,
            n_layer=recipe.layers,
            n_head=recipe.heads,
            n_inner=recipe.intermediate,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=eos,
            eos_token_id=eos,
            pad_token_id=eos,
        )
        model: nn.Module = GPT2LMHeadModel(config)
        return model
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden,
        num_hidden_layers=recipe.layers,
        num_attention_heads=recipe.heads,
        intermediate_size=recipe.intermediate,
        max_position_embeddings=MAX_LENGTH,
        type_vocab_size=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=tokenizer.pad_token_id,
    )
    bert: nn.Module = BertForMaskedLM(config)
    return bert


def token_loss(logits: torch.Tensor, labels: torch.Tensor, kind: Kind) -> torch.Tensor:
    """Mean cross-entropy per scored token (GPT-2: next token; BERT: masked tokens)."""
    if kind == "gpt2":
        logits, labels = logits[:, :-1], labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


@torch.no_grad()
def evaluate(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, kind: Kind) -> dict[str, float]:
    """Held-out loss in nats per scored token, summed over batches of 64 blocks, and its perplexity."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(inputs), 64):
        logits = model(input_ids=inputs[i : i + 64]).logits.double()
        lab = labels[i : i + 64]
        scored = int((lab[:, 1:] if kind == "gpt2" else lab).ne(IGNORE).sum())
        total += float(token_loss(logits, lab, kind)) * scored
        count += scored
    loss = total / count
    return {"loss": loss, "perplexity": math.exp(loss), "tokens_scored": count}


def train(
    recipe: LmRecipe, tokenizer: Any, texts: Sequence[str], log: Any = print
) -> tuple[nn.Module, dict[str, Any]]:
    """Train one sample language model on ``texts``; returns the model and what happened."""
    deterministic(recipe.seed)
    model = create(recipe, tokenizer)
    data = pack(tokenizer, texts, recipe.kind)

    def batch_loss(idx: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        ids = data[idx]
        inputs, labels = (
            (ids, ids) if recipe.kind == "gpt2" else mlm_mask(ids, tokenizer, recipe.mask_prob, generator)
        )
        return token_loss(model(input_ids=inputs).logits, labels, recipe.kind)

    run = fit(model, len(data), batch_loss, recipe, log)
    return model, run | {
        "recipe": asdict(recipe),
        "train_blocks": len(data),
        "train_tokens": int(data.numel()),
    }
