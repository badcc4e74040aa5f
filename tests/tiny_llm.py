"""A tiny random-init Llama for tests, saved where a test asks (``save_pretrained``): d 16, one layer, two
query heads over one KV head, unless the test says otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

SMALL: dict[str, Any] = {
    "vocab_size": 48,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
}


def tiny_llama(folder: Path | None = None, **config: Any) -> nn.Module:
    """A seeded random-init ``LlamaForCausalLM`` of :data:`SMALL` updated by ``config``, saved to
    ``folder``."""
    import transformers as tf

    torch.manual_seed(0)
    model: nn.Module = tf.AutoModelForCausalLM.from_config(tf.LlamaConfig(**{**SMALL, **config}))
    if folder is not None:
        model.save_pretrained(folder)  # type: ignore[operator]
    return model
