"""Issue 38, items 4 and 8: safetensors headers that the streamed reader (``condcli weights``) accepted on
077f2f7 and then failed on or read wrongly: tensors sharing bytes (every weight could read the same
numbers), a shape whose element count overflows (exit 3 in torch's reshape), a header nested 200,000 deep
(RecursionError). Each is one InputError naming the file; the ordinary files stay readable."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from condcli.errors import InputError
from condcli.loading.safetensors_stream import read_header


def _file(path: Path, header: dict[str, Any] | bytes, data: bytes) -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def _refused(path: Path) -> str:
    with pytest.raises(InputError) as e:
        read_header(path)
    assert e.value.exit_code == 2 and e.value.message.startswith(f"{path} is not a readable safetensors file")
    return e.value.message


def test_tensors_that_share_bytes(tmp_path: Path) -> None:
    entry = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}
    said = _refused(_file(tmp_path / "a.safetensors", {"a": entry, "b": {**entry}}, bytes(16)))
    assert "tensors 'a' and 'b' share bytes" in said
    half = {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]}
    said = _refused(_file(tmp_path / "b.safetensors", {"a": entry, "b": half}, bytes(24)))
    assert "share bytes" in said


@pytest.mark.parametrize("shape", [[0, 1 << 64], [0, 1 << 40, 1 << 40], [1 << 63]])
def test_a_shape_past_2_63_elements(tmp_path: Path, shape: list[int]) -> None:
    entry = {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}
    said = _refused(_file(tmp_path / "w.safetensors", {"w": entry}, b""))
    assert "more than 2^63 elements" in said


def test_a_header_nested_200000_deep(tmp_path: Path) -> None:
    said = _refused(_file(tmp_path / "w.safetensors", b"[" * 200_000 + b"]" * 200_000, b""))
    assert said.endswith("(its header is nested too deeply)")


def test_real_files_and_empty_tensors_still_read(tmp_path: Path) -> None:
    """Empty tensors hold no bytes, so one at another's offset shares none (safetensors writes them so)."""
    tensors = {"a": torch.ones(2, 3), "e": torch.zeros(0, 4), "f": torch.zeros(0), "b": torch.ones(5)}
    save_file(tensors, str(tmp_path / "w.safetensors"))
    found = read_header(tmp_path / "w.safetensors")
    assert {k: v.shape for k, v in found.items()} == {k: tuple(t.shape) for k, t in tensors.items()}
