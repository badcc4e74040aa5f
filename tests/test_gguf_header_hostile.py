"""Issue 38, items 4 and 8: GGUF metadata that transformers divides by or builds a norm from (zero heads:
ZeroDivisionError, exit 3 on 077f2f7; a NaN epsilon or a negative rope base: "P cannot be observed") and
tensors that all share bytes (accepted, every weight reading the same numbers) are refused by condcli's
header reader with a line that says what is wrong in the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from condcli.errors import InputError
from condcli.loading.gguf import read
from tests import gguf_files as gf


def _refused(path: Path) -> str:
    with pytest.raises(InputError) as e:
        read(path)
    assert e.value.exit_code == 2 and e.value.message.startswith(f"{path} is not a readable GGUF file: ")
    return e.value.message.split(": ", 1)[1]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"head_count": 0}, "llama.attention.head_count is 0; it must be above 0"),
        ({"rms_eps": float("nan")}, "llama.attention.layer_norm_rms_epsilon is nan, not a finite number"),
        ({"rms_eps": -1e-5}, "llama.attention.layer_norm_rms_epsilon is -1e-05; it must be at least 0"),
        ({"rope_base": -10000.0}, "llama.rope.freq_base is -10000; it must be above 0"),
        ({"rope_base": float("inf")}, "llama.rope.freq_base is inf, not a finite number"),
    ],
)
def test_metadata_that_is_no_model(tmp_path: Path, options: dict[str, Any], says: str) -> None:
    path = gf.write_llama(gf.tiny_llama(), tmp_path / "m.gguf", **options)
    assert _refused(path) == says


def test_tensors_that_share_bytes(tmp_path: Path) -> None:
    path = gf.write_llama(gf.tiny_llama(), tmp_path / "m.gguf")
    assert len(read(path).tensors) > 1
    gf.same_offsets(path)
    assert "share bytes 0…" in _refused(path)


def test_a_shape_past_2_63_elements(tmp_path: Path) -> None:
    """An empty dimension makes the byte count 0 (so no offset check fires), the other one overflows int64."""
    entry = gf.tensor_entry("token_embd.weight", (0, (1 << 64) - 1), 0, 0)
    path = tmp_path / "m.gguf"
    raw = gf.raw_header(1, 1, gf.architecture_kv() + entry)
    path.write_bytes(raw + bytes(-len(raw) % 32 + 32))  # a data section after the alignment
    assert (
        _refused(path)
        == f"tensor 'token_embd.weight' has dimensions [0, {(1 << 64) - 1}]: more than 2^63 elements"
    )
