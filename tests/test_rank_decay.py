"""Rank decay of P (docs/math.md#rank-decay) against independent references: float64 NumPy SVDs of attention
probabilities the test records itself (timm hooks, transformers' own ``attentions``), and closed forms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis.rank_decay import RankDecayOptions, analyse_rank_decay
from condcli.analysis.rank_layers import default_index
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Batch, InputSpec, Preprocessing, stream
from condcli.inputs.preprocessing import timm_preprocessing
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.reports.rank import RankDecayReport, RankLayer
from condcli.spectra import cumulative_spectrum, effective_rank_of_spectrum, rank_at_fraction
from tests.helpers import np_cumulative, np_erank, np_rank90
from tests.recording import replay, vit_probs

LAM = 10.0


# ------------------------------------------------------------------------------------- the formulas


def test_cumulative_spectrum_equals_numpy_is_monotone_and_ends_at_one() -> None:
    rng = np.random.default_rng(0)
    P = torch.softmax(torch.from_numpy(rng.standard_normal((5, 3, 40, 40)) * 3), -1)
    sigma = torch.linalg.svdvals(P)
    c = cumulative_spectrum(sigma)
    np.testing.assert_allclose(c.numpy(), np_cumulative(P.numpy()), rtol=1e-12, atol=1e-14)
    assert bool((c.diff(dim=-1) >= 0).all())
    assert bool((c[..., -1] == 1.0).all())  # exactly, not 0.9999999999999998


def test_identity_like_p_is_full_rank_and_rank_one_p_puts_all_mass_first() -> None:
    n = 20
    eye = torch.eye(n, dtype=torch.float64)  # every token attends only to itself: full rank
    c = cumulative_spectrum(torch.linalg.svdvals(eye))
    np.testing.assert_allclose(c.numpy(), np.arange(1, n + 1) / n, rtol=1e-15)
    assert float(rank_at_fraction(c, 0.9)) == 18  # 18/20 = 0.9 exactly
    assert float(effective_rank_of_spectrum(torch.linalg.svdvals(eye))) == pytest.approx(n, rel=1e-5)

    p = torch.softmax(torch.randn(n, dtype=torch.float64), 0)
    ones = torch.ones(n, n, dtype=torch.float64) * p  # every row the same distribution: rank 1
    c1 = cumulative_spectrum(torch.linalg.svdvals(ones))
    np.testing.assert_allclose(c1.numpy(), np.ones(n), atol=1e-14)
    assert float(rank_at_fraction(c1, 0.9)) == 1
    assert float(effective_rank_of_spectrum(torch.linalg.svdvals(ones))) == pytest.approx(1.0, abs=1e-4)


def test_rank_at_fraction_counts_from_one_and_a_zero_spectrum_is_all_mass() -> None:
    c = torch.tensor([0.5, 0.8, 0.9, 1.0], dtype=torch.float64)
    assert float(rank_at_fraction(c, 0.9)) == 3
    assert float(rank_at_fraction(c, 0.5)) == 1
    assert cumulative_spectrum(torch.zeros(3, dtype=torch.float64)).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        rank_at_fraction(c, 0.0)


def test_default_index_is_round_n_over_4() -> None:
    assert [default_index(n) for n in (1, 2, 49, 65, 197, 512)] == [1, 1, 12, 16, 49, 128]


# ------------------------------------------------------------------------- the sample ViT, recorded P


def check_layer(layer: RankLayer, P: np.ndarray, m: int) -> None:
    """One layer of the report against NumPy on P (S, G, H, n, n)."""
    S, G, H = P.shape[:3]
    c = np_cumulative(P)  # (S, G, H, n)
    rows = c.reshape(-1, c.shape[-1])
    np.testing.assert_allclose(layer.cumulative.median, np.median(rows, 0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.cumulative.p10, np.percentile(rows, 10, 0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.cumulative.p90, np.percentile(rows, 90, 0), rtol=1e-10, atol=1e-12)
    at_m = c[..., m - 1]
    assert layer.index_m == m and layer.n == P.shape[-1] and layer.heads == H and layer.samples == S
    np.testing.assert_allclose(layer.at_m.median, np.median(at_m), rtol=1e-10)
    np.testing.assert_allclose(layer.at_m.per_sample, np.median(at_m.reshape(S, -1), 1), rtol=1e-10)
    assert layer.at_m.matrices == S * G * H
    heads = [np.median(at_m[:, :, h]) for h in range(H)]
    np.testing.assert_allclose(layer.heads_at_m, heads, rtol=1e-10)
    assert layer.rank90.median == np.median(np_rank90(c))
    assert (layer.rank90.min, layer.rank90.max) == (np_rank90(c).min(), np_rank90(c).max())
    np.testing.assert_allclose(layer.erank.median, np.median(np_erank(P)), rtol=1e-9)
    s = np.linalg.svd(P, compute_uv=False).reshape(-1, P.shape[-1])
    # σ at or below the resolution (the largest tol = u·‖P‖_F of float32 P) are not measurements: a
    # percentile is NumPy's where both values it lies between are measured, NaN (JSON null) otherwise
    # (docs/math.md#spectra-below-resolution, issue 44)
    eps64 = np.finfo(np.float64).eps
    tol = np.maximum(
        np.finfo(np.float32).eps / 2 * np.sqrt((s**2).sum(1)), max(P.shape[-2:]) * eps64 * s[:, 0]
    )
    res = float(tol.max())
    assert layer.sigma.resolution == pytest.approx(res, rel=1e-9)
    for q, got in ((50, layer.sigma.median), (10, layer.sigma.p10), (90, layer.sigma.p90)):
        lo = int(np.floor((s.shape[0] - 1) * q / 100))
        want = [float(np.percentile(col, q)) if lo >= int((col <= res).sum()) else np.nan for col in s.T]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-13)
        assert all(np.isnan(v) or v > res for v in got)


@pytest.fixture(scope="module")
def vit() -> tuple[LoadedModel, list[Batch], RankDecayReport]:
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=3)))
    options = RankDecayOptions(lam=LAM, conditioned=True, heads=True)
    return loaded, batches, analyse_rank_decay(loaded, replay(batches), options, "test")


def test_every_layer_equals_numpy_on_the_models_own_p(vit: Any) -> None:
    loaded, batches, report = vit
    P = vit_probs(loaded, batches)
    assert [layer.index for layer in report.rank_decay.layers] == list(range(len(P)))
    assert report.rank_decay.index_m == 16  # n = 65 → round(65/4)
    for layer, p in zip(report.rank_decay.layers, P, strict=True):
        check_layer(layer, p[:, None], 16)
        # --heads: per head, statistics over samples only
        c = np_cumulative(p)
        for h in layer.heads_detail or ():
            np.testing.assert_allclose(h.cumulative_median, np.median(c[:, h.head], 0), rtol=1e-10)
            np.testing.assert_allclose(h.at_m.per_sample, c[:, h.head, 15], rtol=1e-10)
            assert h.rank90.per_sample == tuple(float(v) for v in np_rank90(c[:, h.head]))
    heat = [layer.heads_at_m for layer in report.rank_decay.layers]
    assert np.array(heat).shape == (6, 4)  # layers × heads of the sample ViT


def test_conditioned_rank_decay_equals_a_hand_made_shifted_forward(vit: Any) -> None:
    loaded, batches, report = vit
    assert report.conditioned_forward.applied and report.rank_decay_conditioned is not None
    P = vit_probs(loaded, batches, shift=LAM)
    for layer, p in zip(report.rank_decay_conditioned.layers, P, strict=True):
        check_layer(layer, p[:, None], 16)
    # the fix spreads attention's mass: at every layer c_16 drops (P is further from rank 1)
    for plain, cond in zip(report.rank_decay.layers, report.rank_decay_conditioned.layers, strict=True):
        assert cond.at_m.median < plain.at_m.median


def test_index_and_batch_split_do_not_change_the_numbers(vit: Any) -> None:
    loaded, batches, report = vit
    again = list(stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=1)))
    other = analyse_rank_decay(loaded, replay(again), RankDecayOptions(lam=LAM, index=3, layers=[0, -1]), "t")
    P = vit_probs(loaded, batches)
    assert other.rank_decay.index_m == 3 and [la.index for la in other.rank_decay.layers] == [0, 5]
    assert other.rank_decay.index_rule == "index = 3"  # the parameter, not a CLI flag, in the JSON
    check_layer(other.rank_decay.layers[1], P[5][:, None], 3)
    # the float32 forward rounds differently per batch size (~1e-6); the analysis itself is batch-invariant
    np.testing.assert_allclose(
        other.rank_decay.layers[0].cumulative.median, report.rank_decay.layers[0].cumulative.median, rtol=1e-4
    )


def test_index_beyond_n_is_one_clear_error_before_more_batches(vit: Any) -> None:
    loaded, batches, _ = vit
    seen = []

    def counted() -> Any:
        for b in batches:
            seen.append(b)
            yield b

    from condcli.inputs.batches import InputStream

    inputs = InputStream("synthetic", "counted", lambda s: counted(), expected=5)
    with pytest.raises(InputError, match=r"index=66 is larger than n = 65") as e:
        analyse_rank_decay(loaded, inputs, RankDecayOptions(lam=LAM, index=66), "t")
    assert "between 1 and 65" in e.value.line()
    assert len(seen) == 1  # images: every P has the same n, so the first batch settles it
    with pytest.raises(InputError, match="at least 1"):
        analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM, index=0), "t")


def test_a_model_with_its_own_shift_refuses_conditioned_and_says_why() -> None:
    loaded = load("vit-conditioned", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    with pytest.raises(UsageError, match="already adds"):
        analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM, conditioned=True), "t")
    report = analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM, layers=[0]), "t")
    assert report.rank_decay_conditioned is None
    assert "its forward is the conditioned one" in (report.conditioned_forward.reason or "")


# ------------------------------------------------------------------- text: padding, causal P, the heatmap


@pytest.mark.parametrize("name", ["gpt2-docstrings", "bert-docstrings"])
def test_text_uses_each_samples_real_tokens_against_transformers_attentions(name: str) -> None:
    from transformers import AutoModel

    from condcli.loading.samples import samples_dir

    loaded = load(name, LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=4, batch_size=4)))
    lengths = batches[0].lengths
    assert lengths is not None and len(set(lengths.tolist())) > 1  # really padded
    report = analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM, heads=True), "t")
    fresh = AutoModel.from_pretrained(str(samples_dir() / name), attn_implementation="eager").eval()
    n_max = int(lengths.max())
    for layer in report.rank_decay.layers:
        assert layer.n == n_max and len(layer.heads_at_m) == layer.heads
        m = layer.index_m
        assert m == default_index(n_max)
        curves, at_m = [], []
        for b, n in enumerate(lengths.tolist()):  # each sample alone, unpadded, through transformers
            ids = batches[0].inputs["input_ids"][b : b + 1, :n]
            with torch.no_grad():
                att = fresh(input_ids=ids, output_attentions=True).attentions[layer.index][0]  # (H, n, n)
            if name.startswith("gpt2"):
                assert "causal" in layer.attention
                assert torch.count_nonzero(torch.triu(att, 1)) == 0  # causal P is lower triangular
            c = np_cumulative(att.double().numpy())  # (H, n)
            padded = np.concatenate([c, np.ones((c.shape[0], n_max - n))], axis=1)  # c = 1 past a sample's n
            curves.append(padded)
            at_m.append(padded[:, m - 1])
        rows = np.concatenate(curves)
        np.testing.assert_allclose(layer.cumulative.median, np.median(rows, 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.heads_at_m, np.median(np.stack(at_m), 0), rtol=1e-5, atol=1e-6)
    assert any("tokens" in note for note in report.notes)  # says that c = 1 past a shorter sample's n


# --------------------------------------------------------------------- families: windows, channels, Nyström


def _loaded(model: torch.nn.Module, adapter: Any, spec: str, pre: Any) -> LoadedModel:
    return LoadedModel(
        spec=spec,
        source="timm",
        weights="random",
        model=model,
        adapter=adapter,
        preprocessing=pre,
        device=torch.device("cpu"),
        dtype=torch.float32,
    )


@pytest.mark.parametrize("key", ["swin", "xcit", "davit"])
def test_families_report_the_attention_they_really_have(key: str) -> None:
    from condcli.capture import capture
    from tests.timm_cases import make_case

    case = make_case(key)
    loaded = _loaded(case.model, case.adapter, key, timm_preprocessing(case.model))
    report = analyse_rank_decay(loaded, replay([case.batch]), RankDecayOptions(lam=LAM), "t")
    got = capture(case.adapter, case.batch)  # P itself is checked against a float64 recomputation there
    assert [la.index for la in report.rank_decay.layers] == [s.index for s in case.adapter.layers]
    for layer, spec in zip(report.rank_decay.layers, case.adapter.layers, strict=True):
        P = got.layers[layer.index].probs
        assert P is not None
        assert layer.attention == spec.attention and layer.heads == spec.heads == P.shape[2]
        check_layer(layer, P.double().numpy(), default_index(P.shape[-1]))
    labels = " ".join(la.attention for la in report.rank_decay.layers)
    if key == "swin":
        assert "windows" in labels and {la.n for la in report.rank_decay.layers} == {16}  # 4×4 windows
    if key == "xcit":
        assert "channels" in labels  # XCA: P is d_h × d_h, named as such, never an N × N
    if key == "davit":
        assert "windows" in labels and "channel" in labels
        assert len({la.n for la in report.rank_decay.layers}) > 1  # 3×3 windows: 9; channel groups: d_h
        assert report.rank_decay.index_rule == "round(n/4) per layer"


def test_nystromformer_p_is_named_an_approximation() -> None:
    from condcli.adapters import adapter_for
    from tests.hf_cases import SEG, build, text_batch

    model = build("nys_approx")
    adapter = adapter_for(model)
    batch = text_batch(model, [SEG, SEG], SEG)
    loaded = _loaded(model, adapter, "nys", Preprocessing("text", "random token ids"))
    report = analyse_rank_decay(loaded, replay([batch]), RankDecayOptions(lam=LAM), "t")
    assert all(layer.approximation for layer in report.rank_decay.layers)
    assert all("Nyström" in layer.attention for layer in report.rank_decay.layers)
    assert any("landmark" in note for note in report.notes)
    # P = K1 · pinv(K2) · K3 with 8 landmarks: rank ≤ 8, so 8 singular values hold all of Σσ
    for layer in report.rank_decay.layers:
        assert layer.cumulative.median[7] == pytest.approx(1.0, abs=1e-6)


def test_layers_whose_p_cannot_be_observed_are_named_and_none_at_all_is_one_error() -> None:
    from dataclasses import replace

    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    adapter = loaded.adapter  # immutable: each case is a new adapter without P in some layers
    blind = tuple(replace(s, probs=None) if s.index in (1, 2) else s for s in adapter.layers)
    loaded = replace(loaded, adapter=replace(adapter, layers=blind))
    report = analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM), "t")
    assert [la.index for la in report.rank_decay.layers] == [0, 3, 4, 5]
    assert "layers 1, 2: P cannot be observed there, so they are left out" in report.notes
    why = "P cannot be observed: MyAttention computes no softmax over the keys"
    none = tuple(replace(s, probs=None, no_probs=why) for s in blind)
    loaded = replace(loaded, adapter=replace(adapter, layers=none))
    with pytest.raises(InputError, match=r"chosen layers \(MyAttention computes no softmax over the keys\)"):
        analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM), "t")
