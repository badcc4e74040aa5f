"""GGUF files as MODEL (issue 31, point 4): a tiny random-init Llama written by the ``gguf`` package's writer
(tests/gguf_files.py) loads through transformers' GGUF support, dequantized, with the tokenizer it carries.

- stored as F32, its report equals the report of the same model saved with save_pretrained (float equality:
  the dequantization of F32 is the identity, and llama.cpp's W_Q/W_K row order is undone exactly);
- stored as Q8_0, the report says so, and its κ(W) equal float64 NumPy of the weights dequantized here by
  hand (a Q8_0 block is a float16 scale times 32 int8 values), W_Q/W_K rows put back in transformers' order;
- without the ``gguf`` package, one line names the extra (exit 2).

Hostile GGUF files are in tests/hostile_cases_loading.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result

from condcli.loading.gguf import Quantization, quantization
from condcli.loading.gguf_header import GgufHeader, TensorEntry
from tests import gguf_files as gf
from tests.helpers import np_kappa

RUN = ("--max-samples", "2", "--batch-size", "2", "--device", "cpu")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """f32.gguf and q8.gguf of one tiny Llama, and its save_pretrained folder with the file's tokenizer."""
    from transformers import AutoTokenizer

    tmp = tmp_path_factory.mktemp("gguf")
    model = gf.tiny_llama()
    f32 = gf.write_llama(model, tmp / "f32.gguf", "F32")
    q8 = gf.write_llama(model, tmp / "q8.gguf", "Q8_0")
    folder = tmp / "folder"
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(tmp), gguf_file=f32.name).save_pretrained(folder)
    return {"f32": f32, "q8": q8, "folder": folder}


def test_f32_file_reports_what_its_folder_reports(
    files: dict[str, Path], cli_json: Callable[..., dict[str, Any]]
) -> None:
    from_file = cli_json("spectrum", str(files["f32"]), *RUN)
    from_folder = cli_json("spectrum", str(files["folder"]), *RUN)
    assert from_file["embedding"] == from_folder["embedding"]
    assert from_file["layers"] == from_folder["layers"]
    assert from_file["inputs"]["tokens"] == from_folder["inputs"]["tokens"]
    assert str(files["f32"]) in from_file["inputs"]["preprocessing"]  # the file's own tokenizer
    assert "weights read from F32 (GGUF, llama.cpp file type ALL_F32; not quantized)" in from_file["notes"]


def _q8_0(raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Q8_0 by hand: blocks of 34 bytes, a float16 scale then 32 int8 values; value = scale · q (float64)."""
    blocks = np.asarray(raw, dtype=np.uint8).reshape(-1, 34)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float64)
    q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)
    return (scale * q).reshape(shape)


def test_q8_0_file_states_its_type_and_kappa_w_of_the_dequantized_weights(
    files: dict[str, Path], cli_json: Callable[..., dict[str, Any]]
) -> None:
    from gguf import GGUFReader

    report = cli_json("spectrum", str(files["q8"]), *RUN)
    assert any(n.startswith("weights dequantized from Q8_0") for n in report["notes"]), report["notes"]
    stored = {t.name: t for t in GGUFReader(str(files["q8"])).tensors}
    original = gf.tiny_llama().state_dict()
    heads, kv_heads, d_h = 4, 2, 32 // 4
    for layer in report["layers"]:
        i = layer["index"]
        for role, gguf_role, n in (
            ("q", "attn_q", heads),
            ("k", "attn_k", kv_heads),
            ("v", "attn_v", kv_heads),
        ):
            t = stored[f"blk.{i}.{gguf_role}.weight"]
            assert t.tensor_type.name == "Q8_0"
            w = _q8_0(t.data, (n * d_h, 32))  # (out, in): transformers' q_proj.weight layout
            w = gf.unpermute(w, n) if role != "v" else w
            exact = original[f"model.layers.{i}.self_attn.{role}_proj.weight"].double().numpy()
            assert not np.array_equal(w, exact) and np.abs(w - exact).max() < 1e-3  # quantized, and close
            assert layer[f"kappa_w{role}"] == pytest.approx(float(np_kappa(w)), rel=1e-9)
            per_head = [float(np_kappa(w[g * d_h : (g + 1) * d_h])) for g in range(n)]
            group = heads // n  # query head h reads KV head h // group
            want = [per_head[h // group] for h in range(heads)]
            assert layer[f"kappa_w{role}_heads"] == pytest.approx(want, rel=1e-9)


def test_the_tokenizer_is_the_files(files: dict[str, Path]) -> None:
    from condcli.loading.sources import LoadOptions, load

    tokens, _, _ = gf.vocabulary()
    loaded = load(str(files["q8"]), LoadOptions(device="cpu"))
    ids = loaded.preprocessing.tokenizer(" the model at")["input_ids"]
    assert ids == [tokens.index("Ġthe"), tokens.index("Ġmodel"), tokens.index("Ġat")]
    assert loaded.quantization is not None and loaded.quantization.types == {"Q8_0": 1.0}
    assert loaded.quantization.to_json()["file_type"] == "Q8_0"


def _header(*tensors: tuple[str, tuple[int, ...], int]) -> GgufHeader:
    entries = tuple(TensorEntry(name, dims, kind, 0, 0) for name, dims, kind in tensors)
    return GgufHeader(
        Path("m.gguf"), 3, {"general.architecture": "llama", "general.file_type": 15}, entries, 0
    )


def test_a_mixed_file_names_its_dominant_types() -> None:
    # Q4_K_M-like: Q4_K matrices, a Q6_K output head and ffn_down, F32 norms (vectors: not counted)
    header = _header(
        ("token_embd.weight", (256, 1000), 12),
        ("blk.0.attn_q.weight", (256, 256), 12),
        ("blk.0.ffn_down.weight", (256, 256), 14),
        ("output.weight", (256, 100), 14),
        ("blk.0.attn_norm.weight", (256,), 0),
        ("blk.0.attn_k.weight", (256, 4), 8),
    )
    q = quantization(header)
    total = 256 * (1000 + 256 + 256 + 100 + 4)
    assert q.types == pytest.approx(
        {"Q4_K": 256 * 1256 / total, "Q6_K": 256 * 356 / total, "Q8_0": 256 * 4 / total}
    )
    assert list(q.types) == ["Q4_K", "Q6_K", "Q8_0"] and q.dominant == ["Q4_K", "Q6_K"]
    assert q.file_type == "Q4_K_M" and q.quantized
    assert q.describe().startswith(
        "weights dequantized from Q4_K (78% of the matrix weights), Q6_K (22%) and 1 other type"
        " (GGUF, llama.cpp file type Q4_K_M)"
    )
    assert (
        Quantization("m.gguf", {"F16": 1.0}, None).describe() == "weights read from F16 (GGUF; not quantized)"
    )


@pytest.mark.parametrize("command", ["inspect", "rank-decay", "sweep-lambda", "compare"])
def test_every_model_command_reads_a_gguf_file(
    command: str, files: dict[str, Path], cli: Callable[..., Result]
) -> None:
    q8 = str(files["q8"])
    args = {
        "inspect": (q8,),
        "rank-decay": (q8, *RUN),
        "sweep-lambda": (q8, "--lambdas", "1,10", *RUN),
        "compare": (str(files["f32"]), q8, *RUN),
    }[command]
    result = cli(command, *args)
    assert result.exit_code == 0, result.output


def test_random_weights_of_a_gguf_file_say_nothing_of_quantization(files: dict[str, Path]) -> None:
    from condcli.loading.sources import LoadOptions, load

    loaded = load(str(files["q8"]), LoadOptions(device="cpu", weights="random"))
    assert loaded.quantization is None and loaded.weights == "random"
    assert not any("dequantized" in n for n in loaded.notes)


def test_without_the_gguf_package_one_line_names_the_extra(
    files: dict[str, Path], cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    result = cli("spectrum", str(files["q8"]), *RUN)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "needs the gguf package" in lines[0] and "pip install 'condcli[gguf]'" in lines[0]
