"""X that is an exact lookup of the model's stored token embeddings (docs/math.md#spectra): storing it adds
no rounding of the capture dtype, so its below-precision flag is judged at float64. A tiny bf16 Llama (X =
embed_tokens(ids), nothing added) is exempt; a bf16 Gemma (X = embed_tokens(ids)·√d) is not. References: the
models' own hidden_states[0] and float64 NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.capture import capture, exact_lookup
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadOptions, load
from tests.helpers import DTYPE_EPS, np_reported_kappa, np_sigma, np_tol
from tests.recording import replay

D, ROWS = 48, 16  # √48 is no power of two: Gemma's scale is a real multiplication


def _ids() -> torch.Tensor:
    """Two samples, each a permutation of the first ROWS token ids (no repeated token)."""
    g = torch.Generator().manual_seed(0)
    return torch.stack([torch.randperm(ROWS, generator=g) for _ in range(2)])


@pytest.fixture(scope="module", params=["llama", "gemma"])
def folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A bf16 causal LM whose first ROWS token embeddings are e_0 … e_14 and 2⁻¹⁰·e_15: κ = 1024 exactly,
    real in float64, below bf16's resolution (2⁻¹⁰ < 2⁻⁸·√15)."""
    import transformers as tf

    torch.manual_seed(0)
    small = dict(
        vocab_size=64,
        hidden_size=D,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=12,
        max_position_embeddings=32,
    )
    config = tf.LlamaConfig(**small) if request.param == "llama" else tf.GemmaConfig(**small)
    model = tf.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    with torch.no_grad():
        w = model.get_input_embeddings().weight
        w[:ROWS] = 0
        w[:ROWS, :ROWS] = torch.diag(torch.tensor([1.0] * (ROWS - 1) + [2.0**-10]))
    path = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(path)
    return request.param, path


def test_only_the_unscaled_lookup_is_exact_and_judged_at_float64(folder: tuple[str, Path]) -> None:
    name, path = folder
    loaded = load(str(path), LoadOptions(device="cpu"))
    assert loaded.dtype == torch.bfloat16
    ids = _ids()
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    model = loaded.model
    with torch.no_grad():
        own = model(**batch.inputs, output_hidden_states=True).hidden_states[0]  # X as the model computed it
    table = model.get_input_embeddings().weight
    exact = torch.equal(own, table[ids])  # the reference: is X the stored rows, entry for entry?
    assert exact == (name == "llama")
    assert (
        exact_lookup(loaded.adapter.model, capture(loaded.adapter, batch, layers=[]).x, batch.inputs) == exact
    )

    report = analyse_spectrum(loaded, replay([batch]), SpectrumOptions(lam=10.0, layers=[0]), "test")
    e = report.embedding
    X = own.double().numpy()
    sigma = np_sigma(X)
    np.testing.assert_allclose(sigma[:, 0] / sigma[:, -1], 1024.0, rtol=1e-2)  # Gemma's rounded scale: a bit
    # reported: the measurement where X is judged at float64 (the exact lookup), else the floor σ_1/tol
    judged = DTYPE_EPS["float64" if exact else "bfloat16"]
    np.testing.assert_allclose(e.kappa.per_sample, np_reported_kappa(X, judged), rtol=1e-9)
    at_bf16 = sigma[:, -1] <= np_tol(X, DTYPE_EPS["bfloat16"])
    at_f64 = sigma[:, -1] <= np_tol(X, DTYPE_EPS["float64"])
    assert at_bf16.all() and not at_f64.any()  # the two judgements differ on this X
    expect = at_f64 if exact else at_bf16
    assert e.below_precision_samples == tuple(np.flatnonzero(expect))
    assert list(e.numerical_rank.per_sample) == [ROWS - int(f) for f in expect]
    data = e.to_json()
    assert data["capture_dtype"] == "bfloat16" and data["exact_lookup"] is exact
    assert data["resolution_dtype"] == ("float64" if exact else "bfloat16")
    lookup_note = [
        n for n in report.notes if n.startswith("X is an exact lookup of the stored token embeddings")
    ]
    below_note = [
        n for n in report.notes if "below bfloat16 resolution" in n and "rerun with `dtype=float64`" in n
    ]
    assert (len(lookup_note), len(below_note)) == ((1, 0) if exact else (0, 1))
