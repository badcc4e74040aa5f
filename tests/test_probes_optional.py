"""Every probe is optional: a model whose attention probabilities P cannot be observed (its softmax is a
function, not a module) still gets X, X_l, A_l, κ(W) and μ(LA), checked here against the model's own
``hidden_states`` and weights; μ(A), κ(P) and H(P) are absent with a note saying why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs import InputSpec, InputStream, stream
from condcli.sources import LoadOptions, load
from tests.helpers import EPS, np_kappa, np_sigma

HEADS = 4


@pytest.fixture(scope="module")
def distilbert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=64, dim=16, n_layers=2, n_heads=HEADS, hidden_dim=32, max_position_embeddings=40
    )
    folder = tmp_path_factory.mktemp("distilbert")
    model = DistilBertModel(config)
    with torch.no_grad():  # LayerNorm at init (γ = 1, β = 0) makes rows mean-zero: X would be singular
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.5)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def opt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    config = OPTConfig(
        vocab_size=64,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        ffn_dim=32,
        max_position_embeddings=16,
        word_embed_proj_dim=16,
    )
    folder = tmp_path_factory.mktemp("opt")
    OPTForCausalLM(config).save_pretrained(folder)
    return folder


def _heads(w: torch.Tensor) -> np.ndarray:
    """nn.Linear weight (H·d_h, d) → (H, d, d_h): each head's columns of the right-multiplying matrix."""
    m = w.detach().double().numpy().T  # d × H·d_h
    return np.stack(np.split(m, HEADS, axis=1))


def test_layers_without_p_still_report_x_l_a_l_w_and_mu_la(distilbert: Path) -> None:
    loaded = load(str(distilbert), LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=3)
    report = analyse_spectrum(loaded, replayed, SpectrumOptions(lam=10.0), "test")
    model = loaded.model
    model.set_attn_implementation("eager")  # as condcli runs it, so the float32 forward is bitwise the same
    with torch.no_grad():
        hs = model(**batches[0].inputs, output_hidden_states=True).hidden_states
    assert [layer.index for layer in report.layers] == [0, 1]
    for layer, block in zip(report.layers, model.transformer.layer, strict=True):
        X = hs[layer.index].double().numpy()  # (S, N, d): the block input, also its attention input
        ka = np_kappa(X)
        rtol = max(1e-9, 100 * EPS * float(ka.max()))  # two LAPACKs agree on σ_min to ≈ eps·κ
        np.testing.assert_allclose(layer.plain["kappa"].per_sample, ka, rtol=rtol)
        np.testing.assert_allclose(layer.plain["kappa_attn_input"].per_sample, ka, rtol=rtol)
        attn = block.attention
        wq, wk, wv = (_heads(m.weight) for m in (attn.q_lin, attn.k_lin, attn.v_lin))
        kq, kk, kv = (np_kappa(w) for w in (wq, wk, wv))
        np.testing.assert_allclose(layer.weights.wq_heads, kq, rtol=1e-9)
        np.testing.assert_allclose(layer.weights.wk, np_kappa(attn.k_lin.weight.detach().double().numpy().T))
        mu_la = ((kq * kk * kv)[None, :] * ka[:, None] ** 3).max(1)
        np.testing.assert_allclose(layer.plain["mu_la"].per_sample, mu_la, rtol=3 * rtol)
        s = np_sigma(X)
        np.testing.assert_allclose(layer.plain["stable_rank"].per_sample, (s**2).sum(1) / s[:, 0] ** 2)
        for key in ("mu_a", "kappa_probs", "attention_entropy"):
            assert layer.plain[key] is None
            assert layer.conditioned is not None and layer.conditioned[key] is None
        assert layer.plain.below["probs"] is None
        assert layer.probs_note is not None and "P cannot be observed" in layer.probs_note
        assert layer.entropy_heads is None
    data = report.to_json()
    assert data["layers"][0]["mu_a"] is None and data["layers"][0]["probs_note"] == layer.probs_note


@pytest.mark.parametrize("model", ["distilbert", "opt"])
def test_cli_spectrum_and_inspect_list_every_layer(
    model: str, request: pytest.FixtureRequest, cli: Callable[..., Any], cli_json: Callable[..., Any]
) -> None:
    folder = str(request.getfixturevalue(model))
    report = cli_json("spectrum", folder, "--max-samples", "2")
    assert [layer["index"] for layer in report["layers"]] == [0, 1]
    for layer in report["layers"]:
        assert layer["mu_la"]["median"] > 0 and layer["kappa_probs"] is None and layer["probs_note"]
    table = cli("spectrum", folder, "--max-samples", "2", "--layers", "0")
    assert table.exit_code == 0, table.output
    assert "P cannot be observed" in table.stdout
    found = cli_json("inspect", folder)
    assert [(f["index"], f["probs_shape"]) for f in found["layers"]] == [(0, None), (1, None)]
    assert all(f["x_in_shape"] and f["probs_note"] for f in found["layers"])
    decay = cli("rank-decay", folder, "--max-samples", "2")
    assert decay.exit_code == 2 and "cannot be observed" in decay.stderr  # it needs P: one clear line
    assert len(decay.stderr.strip().splitlines()) == 1
