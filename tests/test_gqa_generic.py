"""Grouped-query attention (docs/math.md#layers): a tiny random-init Llama with 4 query heads sharing 2
key/value heads, checked against its own weights sliced by hand and its own hidden states."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import InputSpec, InputStream, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import DTYPE_EPS, EPS, np_kappa, np_reported_kappa

H, KV, DH, D = 4, 2, 8, 32


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=D,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=H,
        num_key_value_heads=KV,
        head_dim=DH,
        max_position_embeddings=24,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # RMSNorm at init is the identity: give it a scale of its own
        for m in model.modules():
            if type(m).__name__ == "LlamaRMSNorm":
                m.weight.uniform_(0.5, 1.5)
    folder = tmp_path_factory.mktemp("llama-gqa")
    model.save_pretrained(folder)
    return folder


def _slices(w: torch.Tensor, heads: int) -> np.ndarray:
    """nn.Linear weight (heads·d_h, d) → (heads, d, d_h), the right-multiplying slices, by hand."""
    m = w.detach().double().numpy().T
    return np.stack([m[:, h * DH : (h + 1) * DH] for h in range(heads)])


def test_gqa_heads_read_their_kv_head(llama: Path) -> None:
    loaded = load(str(llama), LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=3)
    report = analyse_spectrum(loaded, replayed, SpectrumOptions(lam=10.0, heads=True), "test")
    model = loaded.model
    model.set_attn_implementation("eager")
    layers = model.layers  # loaded as the base LlamaModel
    seen: dict[int, torch.Tensor] = {}
    handles = [
        block.self_attn.register_forward_pre_hook(
            lambda m, a, k, i=i: seen.__setitem__(i, k["hidden_states"].detach()), with_kwargs=True
        )
        for i, block in enumerate(layers)
    ]
    try:
        with torch.no_grad():
            hs = model(**batches[0].inputs, output_hidden_states=True).hidden_states
    finally:
        for h in handles:
            h.remove()
    data = report.to_json()
    for layer, block in zip(report.layers, layers, strict=True):
        attn = block.self_attn
        wq, wk, wv = (
            _slices(attn.q_proj.weight, H),
            _slices(attn.k_proj.weight, KV),
            _slices(attn.v_proj.weight, KV),
        )
        group = np.arange(H) // (H // KV)  # query head h reads KV head h // 2
        kq, kk, kv = np_kappa(wq), np_kappa(wk)[group], np_kappa(wv)[group]
        np.testing.assert_allclose(layer.weights.wq_heads, kq, rtol=1e-9)
        np.testing.assert_allclose(layer.weights.wk_heads, kk, rtol=1e-9)
        np.testing.assert_allclose(layer.weights.wv_heads, kv, rtol=1e-9)
        full_k = attn.k_proj.weight.detach().double().numpy().T  # d × (H_kv·d_h) = 32 × 16
        np.testing.assert_allclose(layer.weights.wk, np_kappa(full_k), rtol=1e-9)
        assert data["layers"][layer.index]["kv_heads"] == KV
        assert len(data["layers"][layer.index]["kappa_wk_heads"]) == H
        X = hs[layer.index].double().numpy()
        A = seen[layer.index].double().numpy()  # after input_layernorm, as the attention reads it
        ka = np_reported_kappa(A, DTYPE_EPS["float32"])  # captured in float32: below it, the floor σ_1/tol
        rtol = max(1e-9, 100 * EPS * float(ka.max()))
        kx = np_reported_kappa(X, DTYPE_EPS["float32"])
        np.testing.assert_allclose(layer.plain["kappa"].per_sample, kx, rtol=max(rtol, 1e-9))
        np.testing.assert_allclose(layer.plain["kappa_attn_input"].per_sample, ka, rtol=rtol)
        mu = (kq * kk * kv)[None, :] * ka[:, None] ** 3
        np.testing.assert_allclose(layer.plain["mu_la"].per_sample, mu.max(1), rtol=4 * rtol)
        assert layer.heads_detail is not None
        for h, head in enumerate(layer.heads_detail):
            g = group[h]
            la = A @ wq[h] @ wk[g].T @ np.swapaxes(A, 1, 2) @ A @ wv[g]  # unrotated, as Prop. 4.2
            kla = np_kappa(la)
            assert head.kappa_la_unrotated is not None  # Llama rotates q, k: κ(LA) actual is rotated
            rtol = max(1e-7, 100 * EPS * kla.max())
            np.testing.assert_allclose(head.kappa_la_unrotated.per_sample, kla, rtol=rtol)
    assert any("grouped-query attention" in note for note in report.notes)


def test_per_head_projections_are_built_once_per_layer_and_batch_not_per_sample(
    llama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """κ(LA) per head reads each query head's KV slice: those slices (and, for a model spread over devices,
    their copy to the math device) are built once per layer and batch, not once per sample (the numbers are
    checked against the weights sliced by hand above)."""
    from condcli.adapters.base import HeadWeights

    loaded = load(str(llama), LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=4, batch_size=2)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=4)
    options = SpectrumOptions(lam=10.0, heads=True)
    calls = [0]
    per_query = HeadWeights.per_query

    def counted(self: HeadWeights, which: str) -> torch.Tensor:
        calls[0] += 1
        return per_query(self, which)  # type: ignore[arg-type]

    monkeypatch.setattr(HeadWeights, "per_query", counted)
    analyse_spectrum(loaded, replayed, options, "test")
    # K and V once per layer and batch of the plain forward (the conditioned one reports no heads): 2 batches
    # of 2 samples, κ(LA) both rotated and unrotated, made it 16 per layer when they were built per call
    assert calls[0] == 2 * len(batches) * len(loaded.adapter.layers)


def test_sequence_first_attention_is_refused_not_misread() -> None:
    """nn.TransformerEncoder's default layout (sequence, batch, width) would make the generic adapter take
    the sequence axis for the batch: one clear error instead of a silently wrong X."""
    from condcli.adapters import adapter_for
    from condcli.errors import InputError

    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32)  # batch_first=False
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    with pytest.raises(InputError, match="batch_first=False") as refused:
        adapter_for(model)
    assert getattr(refused.value, "code", None) == "qkv-unreadable"  # what stands before q/k/v: the layout
    first = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    assert len(adapter_for(torch.nn.TransformerEncoder(first, 2, enable_nested_tensor=False)).layers) == 2


def test_decoder_p_is_the_weights_its_attention_returns(llama: Path) -> None:
    """P of an HF decoder of no known family: the eager attention's own weights (output_attentions), its
    κ(P) and, with the causal support i + 1 taken from the mask's structure, its H(P)."""
    loaded = load(str(llama), LoadOptions(device="cpu"))
    assert all(spec.probs is not None and spec.causal for spec in loaded.adapter.layers)
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=3)
    report = analyse_spectrum(loaded, replayed, SpectrumOptions(lam=10.0, conditioned=False), "test")
    model = loaded.model
    model.set_attn_implementation("eager")
    with torch.no_grad():
        att = model(**batches[0].inputs, output_attentions=True).attentions
    for layer in report.layers:
        P = att[layer.index].double().numpy()  # (S, H, n, n)
        n = P.shape[-1]
        kp = np_kappa(P)  # (S, H)
        rtol = max(1e-9, 100 * EPS * float(kp.max()))
        np.testing.assert_allclose(layer.plain["kappa_probs"].per_sample, kp.max(1), rtol=rtol)
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0).sum(-1)  # (S, H, n)
        support = np.arange(1, n + 1)
        ent = (h[..., 1:] / np.log(support[1:])).mean(-1)  # query 0 sees one key: left out
        np.testing.assert_allclose(layer.plain["attention_entropy"].per_sample, ent.min(1), rtol=1e-9)
