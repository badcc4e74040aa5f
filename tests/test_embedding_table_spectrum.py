"""The embedding table in `spectrum` and `check` (docs/math.md#embedding-table): κ(E) and the untied output
head of a tiny Llama against float64 NumPy SVD of the weights, in the JSON, the table and the page; the
`max_kappa_table` gate; a ViT has no table, and its gate says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rich.console import Console

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.errors import UsageError
from condcli.gate import check
from condcli.inputs.batches import Batch, InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from tests.recording import replay
from tests.tiny_llm import tiny_llama


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    model = tiny_llama(vocab_size=64, tie_word_embeddings=False)
    with torch.no_grad():  # a known, ill-conditioned E: one direction scaled down by 1e-3
        model.get_input_embeddings().weight[:, 0] *= 1e-3
    path = tmp_path_factory.mktemp("llama")
    model.save_pretrained(path)
    e = model.get_input_embeddings().weight.detach().double().numpy()
    head = model.get_output_embeddings().weight.detach().double().numpy()
    return path, e, head


@pytest.fixture(scope="module")
def report(llama: tuple[Path, np.ndarray, np.ndarray]) -> dict[str, Any]:
    loaded = load(str(llama[0]), LoadOptions(device="cpu"))
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a"])
    r = analyse_spectrum(loaded, replay([batch]), SpectrumOptions(lam=10.0, layers=[]), "test")
    out = Console(width=200, record=True, file=open("/dev/null", "w"))
    from condcli.cli.spectrum_table import render

    render(out, r)
    data: dict[str, Any] = json.loads(json.dumps(r.to_json()))
    data["_printed"] = out.export_text()
    return data


def test_kappa_of_e_and_of_the_untied_head_are_float64_numpys(
    report: dict[str, Any], llama: tuple[Path, np.ndarray, np.ndarray]
) -> None:
    _, e, head = llama
    table = report["embedding_table"]
    s = np.linalg.svd(e, compute_uv=False)
    assert table["shape"] == [64, 16] and table["tied"] is False
    assert table["kappa"] == pytest.approx(s[0] / s[-1], rel=1e-6)
    np.testing.assert_allclose(table["spectrum"], s, rtol=1e-6)
    h = np.linalg.svd(head, compute_uv=False)
    assert table["lm_head"]["kappa"] == pytest.approx(h[0] / h[-1], rel=1e-6)
    printed = report["_printed"]
    assert "embedding table E model.embed_tokens.weight 64 × 16: κ = " in printed
    assert "output head (untied) lm_head.weight 64 × 16" in printed


def test_the_page_and_the_gate(report: dict[str, Any]) -> None:
    from condcli.html import render_html

    data = {k: v for k, v in report.items() if k != "_printed"}
    page = render_html(data)
    assert "Embedding table E" in page and "κ(E)" in page
    kappa = data["embedding_table"]["kappa"]
    failed = check(data, limits={"max_kappa_table": kappa / 2})
    assert not failed.passed and failed.rules[0].metric == "embedding_table.kappa"
    assert "κ(E)" in (failed.rules[0].reason or "")
    assert check(data, limits={"max_kappa_table": kappa * 2}).passed


def test_a_vit_has_no_table_and_its_gate_says_so() -> None:
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    inputs = stream(loaded.preprocessing, InputSpec(max_samples=1, batch_size=1))
    data = analyse_spectrum(loaded, inputs, SpectrumOptions(lam=10.0, layers=[]), "test").to_json()
    assert "embedding_table" not in data
    with pytest.raises(UsageError, match="max_kappa_table gates the token-embedding table E"):
        check(json.loads(json.dumps(data)), limits={"max_kappa_table": 100})
