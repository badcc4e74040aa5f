"""Every probe is optional: a model whose attention probabilities P cannot be observed (timm's CoaT-Lite
computes factorized attention, a softmax of K over the tokens: no q × k probability matrix) still gets X,
X_l, A_l, κ(W), μ(LA) and the stable rank, checked here against the test's own hooks and the model's
weights; μ(A), κ(P) and H(P) are absent with a note saying why. A probe that fires with nothing to take
leaves the layer without P."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from condcli.adapters.base import Probe
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.capture import LayerCapture, capture
from condcli.inputs.batches import InputSpec, InputStream, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import EPS, np_kappa, np_reported_kappa, np_sigma

F32 = 2.0**-23

MODEL = "coat_lite_tiny"  # timm's CoaT-Lite: no family of its own, factorized attention, no P to observe
RANDOM = LoadOptions(weights="random", device="cpu")


def _heads(w: np.ndarray, heads: int) -> np.ndarray:
    """d × (H·d_h) → (H, d, d_h): each head's columns, by hand."""
    return np.stack(np.split(w, heads, axis=1))


def test_layers_without_p_still_report_x_l_a_l_w_and_mu_la() -> None:
    loaded = load(MODEL, RANDOM)
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=3)
    report = analyse_spectrum(loaded, replayed, SpectrumOptions(lam=10.0, layers=[0, -1]), "test")
    model, specs = loaded.model, loaded.adapter.layers
    blocks = [model.get_submodule(specs[0].name), model.get_submodule(specs[-1].name)]
    seen: dict[str, torch.Tensor] = {}
    handles = []
    for i, block in enumerate(blocks):
        # X_l: the stream the attention adds to, after the block's conv position encoding (cpe): norm1's input
        handles.append(
            block.norm1.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(f"x{i}", a[0]))
        )
        handles.append(block.norm1.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(f"a{i}", o)))
    try:
        with torch.no_grad():
            model(batches[0].inputs["pixel_values"])
    finally:
        for h in handles:
            h.remove()
    assert [layer.index for layer in report.layers] == [0, len(specs) - 1]
    for i, (layer, block) in enumerate(zip(report.layers, blocks, strict=True)):
        X, A = seen[f"x{i}"].double().numpy(), seen[f"a{i}"].double().numpy()
        kx, ka = np_reported_kappa(X, F32), np_reported_kappa(A, F32)  # floors where below float32 resolution
        rtol = max(1e-9, 100 * EPS * float(max(kx.max(), ka.max())))  # LAPACKs agree on σ_min to ≈ eps·κ
        np.testing.assert_allclose(layer.plain["kappa"].per_sample, kx, rtol=rtol)
        np.testing.assert_allclose(layer.plain["kappa_attn_input"].per_sample, ka, rtol=rtol)
        attn = next(m for m in block.modules() if isinstance(getattr(m, "qkv", None), torch.nn.Linear))
        H = attn.num_heads
        qkv = attn.qkv.weight.detach().double().numpy().T  # d × 3d, [Q|K|V]
        wq, wk, wv = (_heads(m, H) for m in np.split(qkv, 3, axis=1))
        kq, kk, kv = (np_kappa(w) for w in (wq, wk, wv))
        np.testing.assert_allclose(layer.weights.wq_heads, kq, rtol=1e-9)
        np.testing.assert_allclose(layer.weights.wk, np_kappa(np.split(qkv, 3, axis=1)[1]), rtol=1e-9)
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


def test_a_probe_with_nothing_to_take_leaves_the_layer_without_p() -> None:
    """An attention that returns no weights in some call: the layer is still handed over, P absent."""
    loaded = load("bert-docstrings", LoadOptions(device="cpu"))
    spec = loaded.adapter.layers[0]
    assert spec.probs is not None
    empty = replace(spec, probs=Probe(spec.probs.module, lambda *args: None, after=True))
    adapter = replace(loaded.adapter, layers=(empty, *loaded.adapter.layers[1:]))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    got: list[LayerCapture] = []
    capture(adapter, batch, layers=[0, 1], sink=got.append)
    assert [layer.index for layer in got] == [0, 1]
    assert got[0].probs is None and got[0].x_in is not None and got[0].attn_in is not None
    assert got[1].probs is not None


def test_cli_spectrum_and_inspect_list_every_layer(
    cli: Callable[..., Any], cli_json: Callable[..., Any]
) -> None:
    args = (MODEL, "--weights", "random", "--max-samples", "2", "--layers", "0,-1")
    report = cli_json("spectrum", *args)
    found = cli_json("inspect", MODEL, "--weights", "random")
    assert [layer["index"] for layer in report["layers"]] == [0, len(found["layers"]) - 1]
    for layer in report["layers"]:
        assert layer["mu_la"]["median"] > 0 and layer["kappa_probs"] is None and layer["probs_note"]
    table = cli("spectrum", *args)
    assert table.exit_code == 0, table.output
    assert "P cannot be observed" in table.stdout
    assert all(f["probs_shape"] is None for f in found["layers"])
    assert all(f["x_in_shape"] and f["probs_note"] for f in found["layers"])
    gate = cli("check", *args, "--min-attention-entropy", "0.3")  # H(P) needs P: say so, name what can gate
    lines = gate.stderr.strip().splitlines()
    assert gate.exit_code == 2 and len(lines) == 1
    assert "cannot be observed in any analysed layer" in lines[0] and "--max-mu-la" in lines[0]
    decay = cli("rank-decay", MODEL, "--weights", "random", "--max-samples", "2")
    assert decay.exit_code == 2 and "cannot be observed" in decay.stderr  # it needs P: one clear line
    assert len(decay.stderr.strip().splitlines()) == 1
