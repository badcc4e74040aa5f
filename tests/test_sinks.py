"""Attention sinks (docs/math.md#layers): the sink score of a head is the mean over queries of P[i, 0]; for
causal attention queries 4… only. A tiny Llama whose weights make head 0 of layer 0 put all its mass on the
first token: its score against the model's own ``output_attentions`` and against a float64 rerun of the
model, the max over heads in the JSON, the one-line note under the table, and the ``max_sink`` gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadOptions, load
from condcli.spectra import SINK_SKIP, sink_score
from tests.recording import replay
from tests.sinking import make_sink_head

D, HEAD_DIM, N = 32, 8, 12
IDS = torch.tensor([[0, *range(1, N)], [0, *range(N, 2 * N - 1)]])  # the first token is token 0, the sink


@pytest.fixture(scope="module")
def sinking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Head 0 of layer 0 reads a constant query c·e_3 (its bias; dims 3 and 7 are RoPE's slowest pair,
    rotated by < 1e-3 rad over 12 positions) and token 0 alone has a key along e_3: logits 2·c·s = 20 on the
    first key and 0 elsewhere, so P[i, 0] ≈ 1 for every query."""
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(
        vocab_size=2 * N,
        hidden_size=D,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=32,
        attention_bias=True,
        rope_theta=1e6,
    )
    model = tf.AutoModelForCausalLM.from_config(config)
    make_sink_head(model, dim=3)
    path = tmp_path_factory.mktemp("sinking")
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def analysed(sinking: Path) -> tuple[Any, torch.Tensor, torch.Tensor]:
    loaded = load(str(sinking), LoadOptions(device="cpu"))
    batch = Batch({"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, None, ["a", "b"])
    report = analyse_spectrum(loaded, replay([batch]), SpectrumOptions(lam=10.0, heads=True), "test")
    import transformers as tf

    own = tf.AutoModelForCausalLM.from_pretrained(sinking, attn_implementation="eager")
    with torch.no_grad():
        p32 = own(**batch.inputs, output_attentions=True).attentions[0]  # (B, H, n, n)
        p64 = own.double()(**batch.inputs, output_attentions=True).attentions[0]
    return report, p32, p64


def _reference(p: torch.Tensor) -> np.ndarray:
    """(B, H, n, n) → (B, H): the mean over queries SINK_SKIP… of P[i, 0], in float64 NumPy."""
    return p.double().numpy()[:, :, SINK_SKIP:, 0].mean(-1)


def test_the_sink_score_of_every_head_is_the_models_own(analysed: Any) -> None:
    report, p32, p64 = analysed
    layer = report.layers[0]
    want = _reference(p32)
    assert want[:, 0].min() > 0.99 and want[:, 1:].max() < 0.5  # head 0 sinks, no other head does
    for h, head in enumerate(layer.heads_detail):
        np.testing.assert_allclose(head["sink"].per_sample, want[:, h], rtol=1e-6)
        np.testing.assert_allclose(head["sink"].per_sample, _reference(p64)[:, h], rtol=1e-4)
    np.testing.assert_allclose(layer.plain["sink"].per_sample, want.max(-1), rtol=1e-6)
    np.testing.assert_allclose(layer.sink_heads, np.median(want, 0), rtol=1e-6)


def test_the_function_skips_the_first_queries_of_causal_attention() -> None:
    p = torch.tril(torch.ones(6, 6, dtype=torch.float64))
    p = p / p.sum(-1, keepdim=True)  # uniform over the keys each query sees: P[i, 0] = 1/(i+1)
    assert float(sink_score(p, causal=True)) == pytest.approx(np.mean([1 / 5, 1 / 6]), rel=1e-12)
    assert float(sink_score(p)) == pytest.approx(np.mean([1 / (i + 1) for i in range(6)]), rel=1e-12)
    assert float(sink_score(torch.ones(1, 1), causal=True)) == 1.0  # one token: its one query


def test_table_json_note_and_gate(analysed: Any) -> None:
    report, _, _ = analysed
    data = json.loads(json.dumps(report.to_json()))
    layer = data["layers"][0]
    assert layer["sink"]["median"] > 0.99 and layer["sink_heads"][0] > 0.99
    assert all(h["sink"] is not None for h in layer["heads_detail"])
    assert report.layers[0].heads_line() == (
        "layer 0 layers.0: 1/4 heads are attention sinks (mass ≥ 0.9 on the first token); "
        "1/4 heads collapsed (H(P) < 0.1)"  # the sink head puts its mass on one key: H(P) ≈ 0 too
    )
    assert report.layers[1].heads_line() is None

    from rich.console import Console

    from condcli.cli.spectrum_table import render
    from condcli.gate import check
    from condcli.html import render_html

    console = Console(width=400, record=True)
    render(console, report)
    shown = console.export_text()
    assert "1/4 heads are attention sinks" in shown and "queries 4… only" in shown
    assert "1/4 heads are attention sinks" in render_html(data)
    failed = check(data, limits={"max_sink": 0.5})
    assert not failed.passed and "sink median" in (failed.rules[0].reason or "")
    assert check(data, limits={"max_sink": 1.0}).passed
