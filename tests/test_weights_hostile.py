"""Hostile safetensors files for ``condcli weights``' streaming reader (tests/hostile_harness.py): a header
of absurd length, a header longer than the file, a tensor past the end, a header that is not JSON, a file
cut inside its length field. Each is one line and exit 2, under an address-space limit."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile_harness import Hostile, check

MEMORY_GIB = 5.0  # torch and transformers alone take ~3.6 GiB of address space


def _llama(tmp: Path) -> Path:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.LlamaConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        vocab_size=64,
        tie_word_embeddings=False,
    )
    tf.LlamaForCausalLM(cfg).save_pretrained(tmp / "m")
    return tmp / "m" / "model.safetensors"


def _broken(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        file = _llama(tmp)
        file.write_bytes(change(file.read_bytes()))

    return setup


def _length(n: int) -> Callable[[bytes], bytes]:
    return lambda raw: struct.pack("<Q", n) + raw[8:]


def _header(edit: Callable[[dict[str, object]], None]) -> Callable[[bytes], bytes]:
    def change(raw: bytes) -> bytes:
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        edit(header)
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + raw[8 + n :]

    return change


def _past_end(header: dict[str, object]) -> None:
    entry = header["lm_head.weight"]
    assert isinstance(entry, dict)
    entry["data_offsets"] = [0, 1 << 40]
    entry["shape"] = [1 << 38, 1]


def _huge_shape(header: dict[str, object]) -> None:
    entry = header["model.embed_tokens.weight"]
    assert isinstance(entry, dict)
    entry["shape"] = [1 << 40, 1 << 20]  # offsets unchanged: they do not hold that many bytes


def _not_json(raw: bytes) -> bytes:
    n = int(struct.unpack("<Q", raw[:8])[0])
    return raw[:8] + b"{" * n + raw[8 + n :]


ARGV = ("weights", "{tmp}/m")
CASES = [
    Hostile("weights-header-2^60", ARGV, 2, "its header claims", _broken(_length(1 << 60)), MEMORY_GIB),
    Hostile("weights-header-past-file", ARGV, 2, "its header claims", _broken(_length(1 << 24)), MEMORY_GIB),
    Hostile("weights-tensor-past-end", ARGV, 2, "past the", _broken(_header(_past_end)), MEMORY_GIB),
    Hostile("weights-shape-lies", ARGV, 2, "bytes for shape", _broken(_header(_huge_shape)), MEMORY_GIB),
    Hostile("weights-header-not-json", ARGV, 2, "header is not JSON", _broken(_not_json), MEMORY_GIB),
    Hostile(
        "weights-cut-in-length", ARGV, 2, "shorter than its 8-byte", _broken(lambda raw: raw[:5]), MEMORY_GIB
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_safetensors(
    case: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    check(case, tmp_path, capfd)
