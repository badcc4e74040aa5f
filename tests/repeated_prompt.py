"""A tiny random-init RoPE decoder (Llama, d 64, two layers) with a word-level tokenizer that adds a BOS
token, and a prompt that repeats tokens: 17 rows, 10 distinct (issue 44)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PROMPT = "the cat sat on the mat and the dog sat on the log and the cat ran"
WORDS = ["<pad>", "<unk>", "<s>", *sorted(set(PROMPT.split()))]
ROWS = len(PROMPT.split()) + 1  # the BOS token first
DISTINCT = len(set(PROMPT.split())) + 1


def word_level_llama(
    folder: Path, words: list[str], *, bos: str | None = None, normalizer: Any = None
) -> None:
    """A tiny random-init Llama (d 64, two layers, GQA, seed 0) saved in ``folder`` with a word-level
    tokenizer over ``words`` (the first is padding; ``<unk>`` stands for any other word): it adds ``bos``
    first where given, and runs ``normalizer`` (a ``tokenizers.normalizers`` one) where given."""
    import torch
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if normalizer is not None:
        tok.normalizer = normalizer
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, vocab[bos])]
        )
    fast = tf.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, unk_token="<unk>", pad_token=words[0]
    )
    torch.manual_seed(0)
    config = tf.LlamaConfig(
        vocab_size=len(words),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        bos_token_id=None if bos is None else vocab[bos],
        pad_token_id=0,
    )
    tf.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    fast.save_pretrained(folder)


def repeated_prompt_llama(folder: Path) -> Path:
    """The model and its tokenizer saved in ``folder``, the prompt in ``folder/prompt.txt``; returns the
    prompt's path."""
    word_level_llama(folder, WORDS, bos="<s>")
    prompt = folder / "prompt.txt"
    prompt.write_text(PROMPT + "\n", encoding="utf-8")
    return prompt


if __name__ == "__main__":
    import sys

    print(repeated_prompt_llama(Path(sys.argv[1])))
