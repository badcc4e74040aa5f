"""Tokenizers trained with the ``tokenizers`` library on the training split, saved as HF fast tokenizers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_LENGTH = 128  # tokens per sequence for both language models

GPT2_SPECIAL = "<|endoftext|>"
BERT_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def byte_level_bpe(texts: Sequence[str], vocab_size: int) -> Any:
    """A GPT-2-style byte-level BPE tokenizer (transformers ``PreTrainedTokenizerFast``)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    tok = ByteLevelBPETokenizer(add_prefix_space=False)
    tok.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=2, special_tokens=[GPT2_SPECIAL], show_progress=False
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=GPT2_SPECIAL,
        eos_token=GPT2_SPECIAL,
        unk_token=GPT2_SPECIAL,
        pad_token=GPT2_SPECIAL,
        model_max_length=MAX_LENGTH,
        padding_side="right",
    )


def wordpiece(texts: Sequence[str], vocab_size: int) -> Any:
    """A BERT-style lower-cased WordPiece tokenizer that adds [CLS] … [SEP].

    The trainer numbers the "##c" continuation pieces in hash-map order, which differs from run to run and
    decides ties between equally frequent merges. So every "##c" is given a sorted id up front (as a
    special token of the trainer), and the tokenizer is then rebuilt from the vocabulary alone, with no
    such special tokens: the same texts always give the same vocabulary.
    """
    from tokenizers import BertWordPieceTokenizer
    from transformers import PreTrainedTokenizerFast

    probe = BertWordPieceTokenizer(lowercase=True)
    normalise = probe.normalizer.normalize_str
    chars = sorted({c for text in texts for c in normalise(text) if not c.isspace()})
    pieces = [f"##{c}" for c in chars]
    probe.train_from_iterator(
        texts,
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[*BERT_SPECIAL, *pieces],
        show_progress=False,
    )
    tok = BertWordPieceTokenizer(probe.get_vocab(), lowercase=True)  # adds [CLS] … [SEP] itself
    pad, unk, cls, sep, mask = BERT_SPECIAL
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=pad,
        unk_token=unk,
        cls_token=cls,
        sep_token=sep,
        mask_token=mask,
        model_max_length=MAX_LENGTH,
        padding_side="right",
    )
