"""``analyse_spectrum`` against independent references: the model's own tensors read with the test's own
hooks (timm blocks, HF ``hidden_states``), the projection weights sliced by hand, and float64 NumPy SVDs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import Batch, InputSpec, stream
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.reports.spectrum import SpectrumReport
from tests.helpers import np_kappa, np_sigma, np_tol
from tests.recording import replay, vit_reference

LAM = 10.0
F32 = np.finfo(np.float32).eps


def np_agg(values: list[float]) -> dict[str, float]:
    v = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def assert_agg(got: Any, values: list[float], rtol: float) -> None:
    """An Aggregate against NumPy's statistics of independently computed per-sample values."""
    np.testing.assert_allclose(got.per_sample, values, rtol=rtol)
    ref = np_agg(values)
    np.testing.assert_allclose(
        [got.median, got.min, got.max], [ref["median"], ref["min"], ref["max"]], rtol=rtol
    )


def head_weights(block: Any, heads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(H, d, d_h) slices of timm's fused qkv (rows ordered [Q|K|V], heads contiguous), by hand."""
    w = block.attn.qkv.weight.detach().double().numpy()
    d = w.shape[1]
    q, k, v = w[:d], w[d : 2 * d], w[2 * d :]
    dh = d // heads
    return tuple(np.stack([m[h * dh : (h + 1) * dh].T for h in range(heads)]) for m in (q, k, v))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def vit() -> tuple[LoadedModel, list[Batch], SpectrumReport]:
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=6, batch_size=4)))
    report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=LAM, heads=True), "test")
    return loaded, batches, report


def test_embedding_numbers_equal_numpy_on_the_models_own_x(vit: Any) -> None:
    loaded, batches, report = vit
    X = vit_reference(loaded, batches, None)["x"]  # (6, 65, 96)
    N, d = X.shape[1:]
    e = report.embedding
    sigma = np_sigma(X)
    assert_agg(e.kappa, list(np_kappa(X)), 1e-9)
    shifted = X + LAM * np.eye(N, d)
    assert_agg(e.kappa_conditioned, list(np_kappa(shifted)), 1e-9)
    assert_agg(e.kappa_corrected, list(2 * sigma[:, 0] / (sigma[:, 0] + sigma[:, -1])), 1e-9)
    assert_agg(e.sigma_max, list(sigma[:, 0]), 1e-9)
    assert_agg(e.sigma_min, list(sigma[:, -1]), 1e-9)
    tol = np_tol(X, F32)[:, None]  # 0.5·eps32·‖X‖_F
    assert list(e.numerical_rank.per_sample) == list((sigma > tol).sum(1).astype(float))
    # the digits the capture supports (docs/math.md): r = tol/σ_k per sample, by Weyl
    np.testing.assert_allclose(e.kappa.per_sample_uncertainty, tol[:, 0] / sigma[:, -1], rtol=1e-9)
    weyl = np.where(LAM > sigma[:, 0], (sigma[:, 0] + LAM) / (LAM - sigma[:, 0]), np.inf)
    assert_agg(e.weyl_bound, list(weyl), 1e-9)
    assert e.spectrum is not None and e.spectrum_conditioned is not None
    np.testing.assert_allclose(e.spectrum.median, np.median(sigma, 0), rtol=1e-9)
    np.testing.assert_allclose(e.spectrum.p10, np.percentile(sigma, 10, 0), rtol=1e-9)
    np.testing.assert_allclose(e.spectrum.p90, np.percentile(sigma, 90, 0), rtol=1e-9)
    np.testing.assert_allclose(e.spectrum_conditioned.median, np.median(np_sigma(shifted), 0), rtol=1e-9)
    assert report.inputs.count == 6 and report.inputs.tokens == N and report.inputs.dim == d


def test_layer_numbers_equal_a_recomputation_from_hooks_and_weights(vit: Any) -> None:
    loaded, batches, report = vit
    ref = vit_reference(loaded, batches, None)
    assert [layer.index for layer in report.layers] == list(range(6))
    for layer, block in zip(report.layers, loaded.model.blocks, strict=True):
        i, H = layer.index, layer.heads
        X, A, P = ref[f"x{i}"], ref[f"a{i}"], ref[f"p{i}"]  # (S, N, d), (S, N, d), (S, H, N, N)
        wq, wk, wv = head_weights(block, H)
        kq, kk, kv = (np_kappa(w) for w in (wq, wk, wv))  # (H,)
        np.testing.assert_allclose(layer.weights.wq_heads, kq, rtol=1e-9)
        np.testing.assert_allclose(layer.weights.wv_heads, kv, rtol=1e-9)
        full_q = np.concatenate(list(wq), axis=1)  # d × d, heads side by side
        np.testing.assert_allclose(layer.weights.wq, np_kappa(full_q), rtol=1e-9)
        ka = np_kappa(A)  # (S,)
        # κ(P) as docs/math.md#spectra reports it: the measurement, or where σ_k ≤ tol the floor σ_1/tol
        sp, tp = np_sigma(P), np_tol(P, F32)  # (S, H, N), (S, H)
        kp = np.where(sp[..., -1] <= tp, sp[..., 0] / tp, np_kappa(P))  # (S, H)
        assert_agg(layer.plain["kappa"], list(np_kappa(X)), 1e-9)
        assert_agg(layer.plain["kappa_attn_input"], list(ka), 1e-9)
        mu_la = (kq * kk * kv)[None, :] * ka[:, None] ** 3
        assert_agg(layer.plain["mu_la"], list(mu_la.max(1)), 1e-9)
        mu_a = kp * ka[:, None] * kv[None, :]
        # P is nearly singular (κ up to ~1e10): two LAPACKs agree on σ_min only to ≈ eps·κ relative
        p_tol = max(1e-9, 100 * np.finfo(np.float64).eps * float(kp.max()))
        assert_agg(layer.plain["mu_a"], list(mu_a.max(1)), p_tol)
        assert_agg(layer.plain["kappa_probs"], list(kp.max(1)), p_tol)
        tol = np_tol(P, F32)  # (S, H): 0.5·eps32·‖P‖_F per head
        assert layer.plain.below["probs"] == int((np_sigma(P)[..., -1] <= tol).any(1).sum())
        # relative uncertainties (docs/math.md): tol/σ_k, inf for a floor; μ(LA): (1 + r_A)³ − 1; a max over
        # heads takes the r of the head that attains it; μ(A): (1 + r_P)(1 + r_A) − 1
        sx, sa = np_sigma(X), np_sigma(A)
        rx, ra = np_tol(X, F32) / sx[:, -1], np_tol(A, F32) / sa[:, -1]
        rp = np.where(sp[..., -1] <= tp, np.inf, tp / sp[..., -1])  # (S, H)
        np.testing.assert_allclose(layer.plain["kappa"].per_sample_uncertainty, rx, rtol=1e-9)
        np.testing.assert_allclose(layer.plain["kappa_attn_input"].per_sample_uncertainty, ra, rtol=1e-9)
        np.testing.assert_allclose(layer.plain["mu_la"].per_sample_uncertainty, (1 + ra) ** 3 - 1, rtol=1e-9)
        at_p, at_mu = kp.argmax(1), mu_a.argmax(1)
        rows = np.arange(len(kp))
        np.testing.assert_allclose(
            layer.plain["kappa_probs"].per_sample_uncertainty, rp[rows, at_p], rtol=1e-6
        )
        mu_rel = (1 + rp[rows, at_mu]) * (1 + ra) - 1
        np.testing.assert_allclose(layer.plain["mu_a"].per_sample_uncertainty, mu_rel, rtol=1e-6)
        assert layer.heads_detail is not None and len(layer.heads_detail) == H
        for h, head in enumerate(layer.heads_detail):
            assert_agg(head.mu_la, list(mu_la[:, h]), 1e-9)
            assert_agg(head.mu_a, list(mu_a[:, h]), p_tol)
            la = A @ wq[h] @ wk[h].T @ np.swapaxes(A, 1, 2) @ A @ wv[h]  # LA(A) per sample, (S, N, d_h)
            kla = np_kappa(la)  # formed in another order (Q(KᵀV) vs left to right): agree to ≈ eps·κ
            assert_agg(head.kappa_la, list(kla), max(1e-9, 100 * np.finfo(np.float64).eps * float(kla.max())))


def test_conditioned_forward_equals_a_hand_made_shifted_forward(vit: Any) -> None:
    loaded, batches, report = vit
    ref = vit_reference(loaded, batches, LAM)
    assert report.conditioned_forward.applied
    for layer in report.layers:
        i = layer.index
        assert layer.conditioned is not None
        assert_agg(layer.conditioned["kappa"], list(np_kappa(ref[f"x{i}"])), 1e-9)
        assert_agg(layer.conditioned["kappa_attn_input"], list(np_kappa(ref[f"a{i}"])), 1e-9)
    # what block 0 sees in the conditioned forward is X + λI_k (shifted in float32 by the model)
    np.testing.assert_allclose(
        report.layers[0].conditioned["kappa"].per_sample,
        report.embedding.kappa_conditioned.per_sample,
        rtol=1e-5,
    )


def test_results_do_not_depend_on_the_batch_split(vit: Any) -> None:
    loaded, batches, report = vit
    singles = [
        Batch({k: v[j : j + 1] for k, v in b.inputs.items()}, None, [b.names[j]])
        for b in batches
        for j in range(b.size)
    ]
    again = analyse_spectrum(loaded, replay(singles), SpectrumOptions(lam=LAM, layers=[0, -1]), "test")
    # the float32 forward itself may round differently per batch size; the analysis adds nothing to that
    np.testing.assert_allclose(again.embedding.kappa.per_sample, report.embedding.kappa.per_sample, rtol=1e-4)
    assert [layer.index for layer in again.layers] == [0, 5]
    np.testing.assert_allclose(
        again.layers[1].plain["kappa"].per_sample, report.layers[5].plain["kappa"].per_sample, rtol=1e-3
    )


@pytest.mark.parametrize("name", ["gpt2-docstrings", "bert-docstrings"])
def test_text_with_padding_uses_each_samples_real_tokens(name: str) -> None:
    from transformers import AutoModel

    loaded = load(name, LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=5)))
    assert batches[0].lengths is not None and len(set(batches[0].lengths.tolist())) > 1  # really padded
    report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=LAM, conditioned=False), "test")
    # reference: a fresh copy of the model, run by transformers itself with hidden_states
    fresh = AutoModel.from_pretrained(_folder(name), attn_implementation="eager")  # as condcli captures
    fresh.eval()
    with torch.no_grad():
        hs = fresh(**batches[0].inputs, output_hidden_states=True).hidden_states
    lengths = batches[0].lengths.tolist()
    per_layer = [[hs[i][b, :n].double().numpy() for b, n in enumerate(lengths)] for i in range(len(hs) - 1)]
    X = per_layer[0]
    assert_agg(report.embedding.kappa, [float(np_kappa(x)) for x in X], 1e-9)
    assert_agg(
        report.embedding.kappa_conditioned, [float(np_kappa(x + LAM * np.eye(*x.shape))) for x in X], 1e-9
    )
    assert report.inputs.tokens == max(lengths)
    for layer in report.layers:
        assert_agg(layer.plain["kappa"], [float(np_kappa(x)) for x in per_layer[layer.index]], 1e-9)
        assert layer.conditioned is None
    # ragged spectra: index i aggregates the samples that have an i-th singular value
    assert report.embedding.spectrum is not None
    sig = [np_sigma(x) for x in X]
    first = [s[0] for s in sig]
    np.testing.assert_allclose(report.embedding.spectrum.median[0], np.median(first), rtol=1e-9)
    assert len(report.embedding.spectrum.median) == max(len(s) for s in sig)


def _folder(name: str) -> str:
    from condcli.loading.samples import samples_dir

    return str(samples_dir() / name)


def test_a_model_with_its_own_shift_reports_what_its_blocks_see() -> None:
    loaded = load("vit-conditioned", LoadOptions(device="cpu"))
    assert loaded.adapter.builtin is not None
    own = loaded.adapter.builtin.lam  # κ(X + λ·I_k) at the model's own λ is what block 0 sees
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=own, layers=[0]), "test")
    assert report.embedding.model_conditioning == "X + 1·I_k"
    assert not report.conditioned_forward.applied and "its plain forward is the conditioned one" in str(
        report.conditioned_forward.reason
    )
    assert report.layers[0].conditioned is None
    # X is taken before the model's own shift; block 0 sees X + 1·I_k
    np.testing.assert_allclose(
        report.layers[0].plain["kappa"].per_sample, report.embedding.kappa_conditioned.per_sample, rtol=1e-5
    )


def test_repeated_rows_are_inf_exactly_and_named() -> None:
    """A float32 X with an exactly repeated token row is singular: κ = inf exactly (not a floor, not flagged
    below precision), rank < k, and κ_distinct is float64 NumPy's κ of the distinct rows of the X the model
    computed (recorded by the hook that repeats the row)."""
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    seen: list[torch.Tensor] = []

    def repeat_first(m: object, a: object, o: torch.Tensor) -> torch.Tensor:
        out = torch.cat([o[:, :1], o[:, :1], o[:, 2:]], 1) if o.shape[0] else o
        seen.append(out.detach().clone())
        return out

    handle = loaded.model.pos_drop.register_forward_hook(repeat_first)
    try:
        report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=LAM, layers=[]), "test")
    finally:
        handle.remove()
    e = report.embedding
    assert e.repeated_rows_samples == (0, 1, 2) and e.below_precision_samples == ()
    assert list(e.kappa.per_sample) == [math.inf] * 3 and not any(e.kappa.per_sample_floor or [])
    assert list(e.distinct_rows.per_sample) == [e.rows.per_sample[0] - 1] * 3
    assert max(e.numerical_rank.per_sample) < e.k
    X = next(x for x in seen if x.shape[0]).double().numpy()
    for got, x in zip(e.kappa_distinct.per_sample, X, strict=True):
        s = np.linalg.svd(np.unique(x, axis=0), compute_uv=False)
        assert got == pytest.approx(s[0] / s[-1], rel=1e-6)
    assert any("repeat a row of X exactly" in n and "`max_kappa_distinct`" in n for n in report.notes)
    assert not any("below float32 resolution" in n for n in report.notes)
    assert report.layers == () and not report.conditioned_forward.applied


def test_memory_is_handed_back_after_every_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming keeps peak memory flat only if freed pages go back to the OS each batch (make bench)."""
    import condcli.analysis.driver as module  # the one batch loop every runner uses

    calls: list[int] = []
    monkeypatch.setattr(module, "release_memory", lambda: calls.append(1))
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=2)))
    analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=LAM, layers=[0]), "test")
    assert len(calls) == len(batches) == 3
