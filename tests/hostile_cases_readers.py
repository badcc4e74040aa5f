"""Hostile-input cases: the file readers (issue 38; run by tests/test_hostile.py through
tests/hostile_harness.py, each under the harness's address-space limit and a timeout that fails a hang).

On a tiny random-init Llama saved with ``save_pretrained`` (tests/tiny_llm.py) and a tiny GGUF
(tests/gguf_files.py): a stored tensor whose shape is not the model's (whole, flat, empty, past 2^63),
tensors that share bytes, a header nested 200,000 deep, a FIFO where a file is read, an index naming a
file outside its folder, and GGUF metadata that divides by zero or is not a number. Each is exit 2 with one
line in every entry point (``weights``, ``spectrum``, ``check --weights-only``).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import gguf_files as gf
from tests.hostile_harness import Hostile
from tests.tiny_llm import tiny_llama

MEMORY_GIB = 5.0  # torch and transformers alone take ~3.6 GiB of address space
HANG_S = 120.0  # a read that blocks fails the case after this long
Q = "model.layers.0.self_attn.q_proj.weight"  # [16, 16] float32 in tiny_llama


def _llama(tmp: Path) -> Path:
    tiny_llama(tmp / "m")
    return tmp / "m" / "model.safetensors"


def _header(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """The tiny Llama with its safetensors header changed by ``edit`` (the data left as it is)."""

    def setup(tmp: Path) -> None:
        file = _llama(tmp)
        raw = file.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        edit(header)
        text = json.dumps(header).encode()
        file.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])

    return setup


def _shape(shape: list[int], empty: bool = False) -> Callable[[dict[str, Any]], None]:
    def edit(header: dict[str, Any]) -> None:
        header[Q]["shape"] = shape
        if empty:  # no bytes: the offsets stay consistent with the shape
            begin = header[Q]["data_offsets"][0]
            header[Q]["data_offsets"] = [begin, begin]

    return edit


def _all_at_zero(header: dict[str, Any]) -> None:
    for name, entry in header.items():
        if name != "__metadata__":
            begin, end = entry["data_offsets"]
            entry["data_offsets"] = [0, end - begin]


def _deep(tmp: Path) -> None:
    file = _llama(tmp)
    raw = file.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    text = b"[" * 200_000 + b"]" * 200_000
    file.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])


def _fifo(name: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _llama(tmp).unlink()  # an index is read only where no model.safetensors is
        os.mkfifo(tmp / "m" / name)

    return setup


def _index_to(target: Callable[[Path], str]) -> Callable[[Path], None]:
    """The tiny Llama's weights moved to {tmp}/elsewhere, named by an index as ``target(tmp)``."""

    def setup(tmp: Path) -> None:
        file = _llama(tmp)
        (tmp / "elsewhere").mkdir()
        moved = file.rename(tmp / "elsewhere" / "model.safetensors")
        (n,) = struct.unpack("<Q", moved.read_bytes()[:8])
        keys = [k for k in json.loads(moved.read_bytes()[8 : 8 + n]) if k != "__metadata__"]
        index = {"weight_map": {k: target(tmp) for k in keys}}
        (tmp / "m" / "model.safetensors.index.json").write_text(json.dumps(index))

    return setup


def _gguf(**options: Any) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        gf.write_llama(gf.tiny_llama(), tmp / "m.gguf", "F32", **options)

    return setup


def _gguf_overlap(tmp: Path) -> None:
    _gguf()(tmp)
    gf.same_offsets(tmp / "m.gguf")


def _case(name: str, argv: tuple[str, ...], says: str, setup: Callable[[Path], None]) -> Hostile:
    return Hostile(name, argv, 2, says, setup, memory_gib=MEMORY_GIB, timeout_s=HANG_S)


WEIGHTS = ("weights", "{tmp}/m")
SPECTRUM = ("spectrum", "{tmp}/m", "--max-samples", "2")
GGUF = ("spectrum", "{tmp}/m.gguf", "--max-samples", "2")
CHECK = ("check", "{tmp}/m", "--weights-only", "--max-kappa-table", "1e30")
OTHER = "has shape [8, 32], the model expects [16, 16]"
CASES: list[Hostile] = [
    # item 1: every stored tensor against the model's own shape, in weights and spectrum alike
    _case("readers-weights-shape", WEIGHTS, OTHER, _header(_shape([8, 32]))),
    _case("readers-spectrum-shape", SPECTRUM, OTHER, _header(_shape([8, 32]))),
    _case("readers-weights-flat", WEIGHTS, "has shape [256], the model expects", _header(_shape([256]))),
    _case(
        "readers-weights-empty",
        WEIGHTS,
        "model.safetensors has shape [0, 16]",
        _header(_shape([0, 16], True)),
    ),
    _case("readers-weights-2^64", WEIGHTS, "more than 2^63 elements", _header(_shape([0, 1 << 64], True))),
    # item 8: tensors that share bytes
    _case("readers-weights-overlap", WEIGHTS, "share bytes", _header(_all_at_zero)),
    _case("readers-gguf-overlap", GGUF, "share bytes", _gguf_overlap),
    # item 3: a FIFO is refused before it is opened
    _case("readers-weights-fifo", WEIGHTS, "model.safetensors is a FIFO", _fifo("model.safetensors")),
    _case("readers-spectrum-fifo", SPECTRUM, "model.safetensors is a FIFO", _fifo("model.safetensors")),
    _case("readers-index-fifo", WEIGHTS, "index.json is a FIFO", _fifo("model.safetensors.index.json")),
    _case("readers-gguf-fifo", GGUF, "m.gguf is a FIFO", lambda tmp: os.mkfifo(tmp / "m.gguf")),
    # item 4: hostile headers in every entry point
    _case("readers-weights-deep", WEIGHTS, "nested too deeply", _deep),
    _case("readers-check-deep", CHECK, "nested too deeply", _deep),
    _case("readers-gguf-heads-0", GGUF, "head_count is 0; it must be above 0", _gguf(head_count=0)),
    _case("readers-gguf-eps-nan", GGUF, "epsilon is nan, not a finite number", _gguf(rms_eps=float("nan"))),
    _case("readers-gguf-rope-negative", GGUF, "freq_base is -10000", _gguf(rope_base=-10000.0)),
    # item 7: an index names only files inside its model folder
    _case(
        "readers-index-parent",
        WEIGHTS,
        "not a file inside",
        _index_to(lambda t: "../elsewhere/model.safetensors"),
    ),
    _case(
        "readers-index-absolute",
        SPECTRUM,
        "not a file inside",
        _index_to(lambda t: str(t / "elsewhere" / "model.safetensors")),
    ),
]
