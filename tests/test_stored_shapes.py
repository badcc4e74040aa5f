"""Issue 38, item 1: a stored tensor whose shape is not the model's (another shape of the same bytes, flat,
empty) or that is not float where the model's is, is refused before any number, by one check that
``condcli weights`` (CLI and API) and ``spectrum``'s loader share: one line naming the file, the tensor and
both shapes. On 077f2f7 ``weights`` printed κ(W_Q) of the 8×32 matrix and ended flat and empty W_Q in an
internal error."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

import condcli
from condcli.errors import InputError
from condcli.loading.sources import load
from tests.tiny_llm import tiny_llama

Q = "model.layers.0.self_attn.q_proj.weight"  # [16, 16] float32


def _edit(file: Path, entry: dict[str, Any]) -> None:
    """Change ``Q``'s entry of the safetensors header of ``file`` (its bytes left where they are)."""
    raw = file.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    begin = header[Q]["data_offsets"][0]
    header[Q].update(entry)
    if entry.get("shape") and 0 in entry["shape"]:
        header[Q]["data_offsets"] = [begin, begin]
    text = json.dumps(header).encode()
    file.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])


@pytest.mark.parametrize("shape", [[8, 32], [256], [0, 16]], ids=["8x32", "flat", "empty"])
def test_weights_refuses_a_tensor_of_another_shape(tmp_path: Path, shape: list[int]) -> None:
    tiny_llama(tmp_path / "m")
    file = tmp_path / "m" / "model.safetensors"
    _edit(file, {"shape": shape})
    said = f"weight '{Q}' in {file} has shape {shape}, the model expects [16, 16]"
    with pytest.raises(InputError) as api:
        condcli.weights(str(tmp_path / "m"))
    assert api.value.message == said and api.value.exit_code == 2


def test_spectrum_loader_says_the_same(tmp_path: Path) -> None:
    tiny_llama(tmp_path / "m")
    file = tmp_path / "m" / "model.safetensors"
    _edit(file, {"shape": [8, 32]})
    with pytest.raises(InputError) as loaded:
        load(str(tmp_path / "m"))
    assert loaded.value.message == f"weight '{Q}' in {file} has shape [8, 32], the model expects [16, 16]"


def test_a_quantized_tensor_for_a_float_weight(tmp_path: Path) -> None:
    tiny_llama(tmp_path / "m")
    file = tmp_path / "m" / "model.safetensors"
    _edit(file, {"dtype": "I32"})  # 4 bytes an element, as F32: the offsets still agree
    with pytest.raises(InputError) as api:
        condcli.weights(str(tmp_path / "m"))
    assert api.value.message == f"weight '{Q}' is I32 in {file}, not floating point"


def test_the_check_passes_the_files_save_pretrained_writes(tmp_path: Path) -> None:
    """Base-model keys (no ``model.`` prefix) and a tied head match the model's names: no false alarm, and
    κ(W_Q) is that of the stored matrix."""
    import torch

    model: Any = tiny_llama(tmp_path / "m", tie_word_embeddings=True)
    model.model.save_pretrained(tmp_path / "base")
    for folder in ("m", "base"):
        report = condcli.weights(str(tmp_path / folder), layers=[0])
        wq = model.model.layers[0].self_attn.q_proj.weight.detach().double()
        s = torch.linalg.svdvals(wq)
        assert report.layers[0].kappas.wq == pytest.approx(float(s[0] / s[-1]), rel=1e-6)
