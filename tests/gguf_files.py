"""Tiny GGUF files for tests/test_gguf.py and tests/hostile_cases_loading.py: a random-init Llama written by
the ``gguf`` package's own writer (as llama.cpp's convert_hf_to_gguf.py writes one), with a byte-level BPE
tokenizer in its metadata, and headers built byte by byte for the hostile cases."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch

LLAMA = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    # GGUF stores the epsilon as float32: one it holds exactly keeps the folder and the file the same model
    "rms_norm_eps": 2.0**-16,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}
WORDS = ("the", "model", "token", "and", "at", "of", "in", "is", "a")
SPECIALS = ("<|endoftext|>", "<|begin|>")
VOCAB = 300


def vocabulary() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) of a byte-level BPE: the 256 byte symbols, two control tokens, the merges
    that spell ``WORDS`` after a space, and padding tokens up to ``VOCAB``."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tokens = list(bytes_to_unicode().values()) + list(SPECIALS)
    merges: list[str] = []
    for word in WORDS:
        spelled = "Ġ" + word
        done = spelled[0]
        for ch in spelled[1:]:
            if done + ch not in tokens:
                merges.append(f"{done} {ch}")
                tokens.append(done + ch)
            done += ch
    tokens += [f"[PAD{i}]" for i in range(VOCAB - len(tokens))]
    types = [3 if t in SPECIALS else 1 for t in tokens]  # 3: CONTROL, 1: NORMAL
    return tokens, types, merges


def tiny_llama(seed: int = 0) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, bos_token_id=257, eos_token_id=256, **LLAMA)
    return LlamaForCausalLM(config).eval()


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's reordering of W_Q / W_K rows for its rotary layout (convert_hf_to_gguf.py, LlamaModel)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of :func:`llama_cpp_permute`."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_llama(
    model: Any,
    path: Path,
    quantize: str = "F32",
    *,
    architecture: str = "llama",
    drop: str | None = None,
    block_count: int | None = None,
    head_count: int | None = None,
    rms_eps: float | None = None,
    rope_base: float | None = None,
) -> Path:
    """``model`` as a GGUF file: its matrices stored as ``quantize`` (F32, Q8_0, …), vectors as F32;
    ``architecture``: what general.architecture says; ``drop``: a GGUF tensor name left out;
    ``block_count``, ``head_count``, ``rms_eps``, ``rope_base``: what the metadata claims (else the
    model's)."""
    import gguf

    cfg = model.config
    qtype = gguf.GGMLQuantizationType[quantize]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg.num_hidden_layers)
    w = gguf.GGUFWriter(str(path), architecture)
    w.add_name("tiny-llama")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers if block_count is None else block_count)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads if head_count is None else head_count)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps if rms_eps is None else rms_eps)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"] if rope_base is None else rope_base)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if quantize == "F32" else gguf.LlamaFileType.MOSTLY_Q8_0)
    tokens, types, merges = vocabulary()
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg.bos_token_id)
    w.add_eos_token_id(cfg.eos_token_id)
    for key, value in model.state_dict().items():
        base, suffix = key.rsplit(".", 1)
        name = f"{names.get_name(base)}.{suffix}"
        array = value.detach().to(torch.float32).numpy()
        if name == drop:
            continue
        if ".attn_q." in name:
            array = llama_cpp_permute(array, cfg.num_attention_heads)
        elif ".attn_k." in name:
            array = llama_cpp_permute(array, cfg.num_key_value_heads)
        if array.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            packed = gguf.quants.quantize(array, qtype)
            w.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=qtype)
        else:
            w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def raw_header(tensors: int, keys: int, body: bytes = b"", version: int = 3) -> bytes:
    """A GGUF file's bytes: magic, version, the counts it claims, then ``body`` as it is."""
    return b"GGUF" + struct.pack("<IQQ", version, tensors, keys) + body


def architecture_kv(name: str = "llama") -> bytes:
    return string("general.architecture") + struct.pack("<I", 8) + string(name)


def tensor_entry(name: str, dims: tuple[int, ...], ggml_type: int, offset: int) -> bytes:
    return string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, ggml_type, offset)


def same_offsets(path: Path) -> None:
    """Every tensor of the GGUF file ``path`` pointed at offset 0 of its data: all of them overlap."""
    from gguf import GGUFReader

    raw = bytearray(path.read_bytes())
    for t in GGUFReader(str(path)).tensors:
        at = raw.index(string(t.name)) + 8 + len(t.name.encode()) + 4 + 8 * len(t.shape) + 4
        raw[at : at + 8] = struct.pack("<Q", 0)
    path.write_bytes(bytes(raw))
