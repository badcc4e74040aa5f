"""Pruned maxima over heads (analysis.headmax, spectra.certify) against decomposing every head.

The bounds are checked against float64 SVD on softmax matrices of every sharpness, causal and collapsed ones,
prescribed spectra up to κ = 1e12, and degenerate matrices; the maxima and floor flags against the full path,
bitwise; and whole reports of real models with pruning forced on against the same reports with it off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis import headmax
from condcli.analysis.headmax import head_maxima
from condcli.analysis.persample import summarize_heads
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import Batch, InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from condcli.spectra import causal as causal_p
from condcli.spectra import mu_softmax_attention, summarize
from condcli.spectra.certify import bound_terms, kappa_bounds
from condcli.spectra.core import upcast
from tests.recording import replay
from tests.test_big_model import _llama  # a tiny Llama (GQA: 4 query heads reading 2 KV heads)

G = torch.Generator().manual_seed(18)


def softmax_heads(count: int, n: int, scale: float, *, causal: bool = False) -> torch.Tensor:
    """``count`` float32 attention matrices n×n: softmax of random logits times ``scale`` (0.1: nearly
    uniform, rank-one-like and below float32's resolution; 30: collapsed onto a few keys, exact zeros)."""
    logits = torch.randn(count, n, n, generator=G) * scale
    if causal:
        logits = logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
    return torch.softmax(logits, -1)


def prescribed(count: int, n: int, kappa: float) -> torch.Tensor:
    """Signed float64 matrices U diag(σ) Vᵀ with σ log-spaced from 1 to 1/κ."""
    u = torch.linalg.qr(torch.randn(count, n, n, generator=G, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(count, n, n, generator=G, dtype=torch.float64))[0]
    s = torch.logspace(0, -np.log10(kappa), n, dtype=torch.float64)
    return u @ torch.diag_embed(s.expand(count, n)) @ v.mT


def cases() -> list[torch.Tensor]:
    out = [softmax_heads(6, n, scale) for n in (1, 2, 7, 50) for scale in (0.1, 1.0, 3.0, 30.0)]
    out += [softmax_heads(6, 64, 0.5, causal=True), softmax_heads(4, 197, 0.02), softmax_heads(4, 197, 2.0)]
    out += [softmax_heads(3, 16, 30.0, causal=True), torch.tril(prescribed(3, 30, 1e4))]
    out += [prescribed(4, 40, k).float() for k in (1.0, 1e3, 1e6)]
    out += [prescribed(4, 40, k) for k in (1e3, 1e8, 1e12)]
    eye, perm = torch.eye(9), torch.eye(9)[torch.randperm(9, generator=G)]
    singular = softmax_heads(1, 9, 1.0)[0].clone()
    singular[3] = singular[5]  # two equal rows
    out += [torch.stack([eye, perm, torch.zeros(9, 9), singular])]
    return out


@pytest.mark.parametrize("mats", cases(), ids=lambda m: f"{m.dtype}-{tuple(m.shape)}")
def test_bounds_hold_and_proven_heads_are_what_the_svd_path_reports(mats: torch.Tensor) -> None:
    x, _ = upcast(mats)
    n = int(x.shape[-1])
    terms = bound_terms(x, mats.dtype)
    sigma = torch.linalg.svdvals(x)
    fro2, lo, hi, s1, s1_lo = terms.unbind(-1)
    slack = 4 * n * 2.2e-16 * sigma[..., 0]  # the reference SVD's own error
    np.testing.assert_allclose(fro2.numpy(), x.square().sum((-2, -1)).numpy(), rtol=1e-13)
    assert bool((s1 >= sigma[..., 0] * (1 - 1e-14)).all()), (s1, sigma[..., 0])
    assert bool((s1_lo <= sigma[..., 0] * (1 + 1e-14)).all()), (s1_lo, sigma[..., 0])
    assert bool((lo <= sigma[..., -1] + slack).all()), (lo, sigma[..., -1])
    assert bool((hi >= sigma[..., -1] - slack).all()), (hi, sigma[..., -1])
    bounds = kappa_bounds(terms, n, mats.dtype)
    ref = summarize(mats, mats.dtype, method="svd", floors=True)
    assert not bool((bounds.resolved & ref.below_precision).any())  # a measurement is never a floor
    assert bool(ref.below_precision[bounds.floor].all())  # a proven floor is one
    assert not bool((bounds.resolved & bounds.floor).any())
    proven = bounds.resolved | bounds.floor
    assert bool((ref.reported[proven] <= bounds.kappa_hi[proven]).all())
    assert bool((ref.reported >= bounds.kappa_lo).all())
    assert bool(torch.isinf(bounds.kappa_hi[~proven]).all())


def test_the_bounds_prove_most_heads_of_ordinary_attention() -> None:
    """Not vacuous: on softmax matrices of moderate sharpness nearly every head is proven a measurement,
    within a few times its κ; causal P, far below resolution, is proven a floor."""
    for scale in (1.0, 3.0):
        mats = softmax_heads(16, 50, scale)
        bounds = kappa_bounds(bound_terms(upcast(mats)[0], torch.float32), 50, torch.float32)
        assert float(bounds.resolved.float().mean()) >= 0.9
        ref = summarize(mats, torch.float32, method="svd", floors=True).reported
        assert float((bounds.kappa_hi[bounds.resolved] / ref[bounds.resolved]).max()) < 3.0
    causal = softmax_heads(8, 300, 1.0, causal=True)
    ref = summarize(causal, torch.float32, method="svd", floors=True)
    assert bool(ref.below_precision.all())
    bounds = kappa_bounds(bound_terms(upcast(causal)[0], torch.float32), 300, torch.float32)
    assert bool(bounds.floor.all()) and not bool(bounds.resolved.any())
    assert float((bounds.kappa_hi / ref.reported).max()) < 1.001  # σ_1/tol, to its bounds' slack
    flat = softmax_heads(8, 50, 1.0)
    flat[:, 7] = flat[:, 9]  # two equal rows, not triangular: a floor left to the SVD
    bounds = kappa_bounds(bound_terms(upcast(flat)[0], torch.float32), 50, torch.float32)
    assert not bool((bounds.resolved | bounds.floor).any())


def full_path(
    mats: list[torch.Tensor], dtype: torch.dtype, method: Any, ka: torch.Tensor, kv: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What ForwardAccumulator computes without pruning: every head decomposed, then the maxima."""
    sp = summarize_heads(mats, dtype, method)
    mu = mu_softmax_attention(sp.reported, ka[..., None], kv)
    return sp.reported.flatten(1).amax(-1), sp.below.flatten(1).any(-1), mu.flatten(1).amax(-1)


def batch(samples: int, groups: int, heads: int, n: int, scales: list[float]) -> list[torch.Tensor]:
    return [
        torch.stack([softmax_heads(heads, n, scales[(s + g) % len(scales)]) for g in range(groups)])
        for s in range(samples)
    ]


@pytest.mark.parametrize(
    ("name", "mats", "dtype"),
    [
        ("vit-like", batch(6, 1, 8, 40, [0.3, 1.0, 3.0]), torch.float32),
        ("windows", batch(4, 3, 4, 16, [1.0, 5.0]), torch.float32),
        ("floors", batch(3, 1, 6, 30, [0.3, 3.0]), torch.float32),
        ("bf16", [m.to(torch.bfloat16) for m in batch(4, 1, 6, 24, [0.5, 2.0])], torch.bfloat16),
        ("ragged", [softmax_heads(5, n, 2.0)[None] for n in (12, 30, 7, 30)], torch.float32),
        ("causal", [softmax_heads(6, n, 1.0, causal=True)[None] for n in (40, 80, 80)], torch.float32),
    ],
)
def test_maxima_and_floors_equal_decomposing_every_head(
    name: str, mats: list[torch.Tensor], dtype: Any
) -> None:
    method = "auto" if dtype == torch.bfloat16 else "svd"
    groups, heads = int(mats[0].shape[0]), int(mats[0].shape[1])
    ka = 1 + torch.rand(len(mats), groups, generator=G, dtype=torch.float64) * 100
    ka[0, 0] = torch.inf if name == "windows" else ka[0, 0]  # a zero A_l: μ is inf whatever P is
    kv = 1 + torch.rand(heads, generator=G, dtype=torch.float64) * 30
    if name == "vit-like":
        mats[1][0, 5] = mats[1][0, 2]  # a tie between two heads of one sample
    if name == "floors":
        for s in (0, 2):
            mats[s][0, 1 + s, 3] = mats[s][0, 1 + s, 4]  # two equal rows: that head is a floor
    got = head_maxima(mats, dtype, method, ka, kv)
    assert got is not None
    kappa, floor, mu = full_path(mats, dtype, method, ka, kv)
    assert torch.equal(got.kappa, kappa)
    assert torch.equal(got.floor, floor)
    assert torch.equal(got.mu, mu)
    total = sum(m.shape[0] * m.shape[1] for m in mats)
    if name in ("vit-like", "windows", "ragged", "causal"):
        assert got.decomposed < total / 2, (got.decomposed, total)  # it does prune
    if name == "floors":
        assert floor.tolist() == [True, False, True]
    if name == "causal":  # every head a floor, proven without its SVD but for the maxima's
        assert bool(floor.all()) and got.decomposed <= 2 * len(mats)


def test_what_is_decomposed_depends_on_the_sample_alone() -> None:
    mats = batch(5, 1, 8, 30, [0.5, 2.0, 8.0])
    ka = 1 + torch.rand(5, 1, generator=G, dtype=torch.float64)
    kv = 1 + torch.rand(8, generator=G, dtype=torch.float64)
    whole = head_maxima(mats, torch.float32, "svd", ka, kv)
    assert whole is not None
    for s in range(5):
        one = head_maxima(mats[s : s + 1], torch.float32, "svd", ka[s : s + 1], kv)
        assert one is not None
        assert torch.equal(one.kappa, whole.kappa[s : s + 1]) and torch.equal(one.mu, whole.mu[s : s + 1])


def test_non_square_p_is_left_to_the_full_path() -> None:
    p = torch.softmax(torch.randn(1, 2, 3, 5, generator=G), -1)
    assert (
        head_maxima([p], torch.float32, "svd", torch.ones(1, 1, dtype=torch.float64), torch.ones(2)) is None
    )


@pytest.mark.parametrize("name", ["vit-plain", "gpt2-docstrings", "bert-docstrings", "llama-gqa"])
def test_reports_are_identical_with_pruning_forced_on(name: str, tmp_path: Path) -> None:
    """The whole spectrum report (every number and flag) of real models: trained samples, padded text, and
    a causal GQA decoder, with the maxima pruned and with every head decomposed."""
    source = str(_llama(tmp_path / "llama")) if name == "llama-gqa" else name
    loaded = load(source, LoadOptions(device="cpu"))
    batches: list[Batch] = list(stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=3)))
    reports = []
    for on in (False, True):
        with headmax.forced(on):
            report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=10.0), "test")
        reports.append(json.dumps(report.to_json(), sort_keys=True))
    assert reports[0] == reports[1]
    assert '"kappa_probs"' in reports[0]


def test_pruning_runs_for_long_causal_p_on_cpu_and_always_on_cuda_unless_forced() -> None:
    cpu, cuda, long = torch.device("cpu"), torch.device("cuda"), headmax.MIN_TOKENS
    assert headmax.enabled(cpu, causal=True, tokens=long)
    assert not headmax.enabled(cpu, causal=True, tokens=long - 1)
    assert not headmax.enabled(cpu, causal=False, tokens=4 * long)
    assert headmax.enabled(cuda, causal=False, tokens=8) and headmax.enabled(cuda, causal=True, tokens=8)
    assert not headmax.enabled(torch.device("mps"), causal=True, tokens=long)  # a kind with no default
    with headmax.forced(True):
        assert headmax.enabled(cpu, causal=False, tokens=8)
        with headmax.forced(False):
            assert not headmax.enabled(cuda, causal=True, tokens=long)
        assert headmax.enabled(cpu, causal=False, tokens=8)
    assert not headmax.enabled(cpu, causal=False, tokens=8)


def test_a_long_causal_model_on_cpu_prunes_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default path of `spectrum` on a trained causal decoder (CPU): with its prompts counted long
    enough, the maxima come from head_maxima, which spares most heads their SVD; at their own length (below
    MIN_TOKENS) and for a ViT (not causal), from every head."""
    calls: list[tuple[int, int]] = []
    real = headmax.head_maxima

    def counting(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        if got is not None:
            calls.append((got.decomposed, sum(int(m.shape[0] * m.shape[1]) for m in args[0])))
        return got

    monkeypatch.setattr(headmax, "head_maxima", counting)
    for source, causal, shortest in (("gpt2-docstrings", True, 1), ("gpt2-docstrings", False, None)):
        calls.clear()
        if shortest is not None:
            monkeypatch.setattr(headmax, "MIN_TOKENS", shortest)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(headmax, "head_maxima", counting)
        loaded = load(source, LoadOptions(device="cpu"))
        batches = list(stream(loaded.preprocessing, InputSpec(max_samples=4, batch_size=4)))
        analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=10.0, conditioned=False), "test")
        assert bool(calls) == causal
        if causal:
            assert sum(d for d, _ in calls) < sum(t for _, t in calls) / 2, calls
    monkeypatch.setattr(headmax, "MIN_TOKENS", 1)
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=10.0, conditioned=False), "test")
    assert not calls  # not causal: every head


def test_long_causal_heads_reuse_their_brackets_bitwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """From causal.MIN_TOKENS on, each head's bounds are its Lanczos brackets, computed one head per task as
    its decomposition computes them: the heads that decide a maximum are decided from those (no second
    computation), and the maxima, floors and μ are bitwise those of decomposing every head."""
    n = causal_p.MIN_TOKENS + 24
    scales = [0.05, 0.5, 2.0, 8.0]
    mats = [
        torch.stack([softmax_heads(1, n, scales[(h + s) % 4], causal=True)[0] for h in range(5)])[None]
        for s in range(2)
    ]
    ka = 1 + torch.rand(2, 1, generator=G, dtype=torch.float64) * 10
    kv = 1 + torch.rand(5, generator=G, dtype=torch.float64) * 10
    reused: list[bool] = []
    inner = causal_p.decided_summary

    def spy(terms: torch.Tensor, size: int, dtype: Any) -> Any:
        got = inner(terms, size, dtype)
        reused.append(got is not None)
        return got

    monkeypatch.setattr(causal_p, "decided_summary", spy)
    got = head_maxima(mats, torch.float32, "svd", ka, kv)
    assert got is not None and any(reused)
    kappa, floor, mu = full_path(mats, torch.float32, "svd", ka, kv)
    assert torch.equal(got.kappa, kappa) and torch.equal(got.floor, floor) and torch.equal(got.mu, mu)
    reused.clear()  # a float64 capture keeps none: the upcast may rescale it, and the decomposition's not
    assert head_maxima([m.double() for m in mats], torch.float64, "svd", ka, kv) is not None
    assert reused == []
    monkeypatch.setattr(causal_p, "decided_summary", lambda *a: None)  # every head decomposed again
    again = head_maxima(mats, torch.float32, "svd", ka, kv)
    assert again is not None
    assert torch.equal(again.kappa_rel, got.kappa_rel) and torch.equal(again.mu_rel, got.mu_rel)
