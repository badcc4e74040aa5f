"""κ(P) of causal attention from Lanczos brackets (condcli/spectra/causal.py) against NumPy's float64 SVD of
the same captured matrix: every head of the conformance decoders and of a tiny Llama, synthetic causal
softmax matrices of assorted temperatures (sink-like, near-identity, previous-token, local, banded,
block-causal), and hypothesis-drawn ones. A decided κ agrees with the SVD's to 1e-8 relative (or within
float64 SVD's own error bound 4n·eps64·κ where that is wider), or both are the same floor."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from condcli.analysis.persample import summarize_heads
from condcli.spectra import causal
from condcli.spectra.certify import bound_terms, kappa_bounds
from tests.cases_decoders import CASES
from tests.tiny_llm import tiny_llama

EPS64 = float(np.finfo(np.float64).eps)
U32 = float(np.finfo(np.float32).eps) / 2


def reference(p: torch.Tensor) -> tuple[float, bool, float, float]:
    """NumPy's float64 SVD of one captured (float32) P: (reported κ, floor, σ_1, σ_n), as the SVD path
    reports them (docs/math.md#spectra)."""
    x = p.detach().to(torch.float64).numpy()
    s = np.linalg.svd(x, compute_uv=False)
    n = x.shape[-1]
    tol = max(U32 * math.sqrt(float(np.sum(s**2))), n * EPS64 * s[0])
    floor = bool(s[-1] <= tol)
    return (s[0] / tol if floor else s[0] / s[-1]), floor, float(s[0]), float(s[-1])


def check(p: torch.Tensor, *, must_decide: bool) -> bool:
    """One causal P (n, n) float32: the brackets hold SVD's σ (within its error), and a decided κ or floor is
    the SVD path's. Returns whether this path decided it."""
    n = int(p.shape[-1])
    terms = causal.brackets(p.to(torch.float64)[None], torch.float32)
    _, s1_lo, s1_hi, sn_lo, sn_hi = terms[0].tolist()
    kappa, floor, s1, sn = reference(p)
    slack = 4 * n * EPS64 * s1  # LAPACK's σ̂ are within this of the σ
    assert s1_lo - slack <= s1 <= s1_hi + slack
    assert sn <= sn_hi + slack
    assert sn_lo - slack <= sn
    got = causal.decide(terms, n, torch.float32)
    if must_decide:
        assert bool(got.ok[0])
    if not bool(got.ok[0]):
        return False
    assert bool(got.below[0]) == floor
    rtol = max(causal.RTOL, 8 * n * EPS64 * (1.0 if floor else kappa))
    assert float(got.reported[0]) == pytest.approx(kappa, rel=rtol)
    return True


def softmax_head(n: int, kind: str, seed: int, *, causal: bool = True) -> torch.Tensor:
    """A softmax P (n, n) in float32 of a given kind of head: causal (lower triangular), or global as a
    ViT's (``causal=False``)."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(n, n, generator=g, dtype=torch.float64)
    i = torch.arange(n)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1) if causal else torch.zeros(n, n, dtype=torch.bool)
    if kind == "broad":
        s = s * 0.02
    elif kind == "warm":
        s = s * (0.3 if causal else 1.0)
    elif kind == "hot":
        s = s * 8
    elif kind == "sink":
        s[:, 0] += 8
    elif kind == "identity":
        s += 10 * torch.eye(n, dtype=torch.float64)
    elif kind == "previous":
        s[i[1:], i[:-1]] += 6
    elif kind == "local":
        s = -0.5 * (i[:, None] - i[None, :]).abs().double() + 0.5 * s
    elif kind == "band":
        mask |= (i[:, None] - i[None, :]) >= 16
    elif kind in ("block", "windows"):  # block-causal, or windowed attention written as one n × n P
        mask |= (i[:, None] // 32) != (i[None, :] // 32)
    elif kind == "repeated":  # two equal queries: exactly singular, a floor
        s[1] = s[0]
    return torch.softmax(s.masked_fill(mask, -math.inf), -1).float()


KINDS = ["broad", "warm", "hot", "sink", "identity", "previous", "local", "band", "block"]


@pytest.mark.parametrize("n", [96, 300])
@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_heads_agree_with_svd(kind: str, n: int) -> None:
    check(softmax_head(n, kind, n), must_decide=True)


def test_floors_and_measurements_both_covered() -> None:
    """The synthetic set holds floors and measurements alike (else it would test half the path)."""
    floors = [reference(softmax_head(96, kind, 96))[1] for kind in KINDS]
    assert any(floors) and not all(floors)


def test_sigma_1_krylov_space_in_float32_then_float64_where_too_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A float32 capture's σ_1 Krylov space is built in float32; where its bracket is wider than RTOL (a
    sharp head: σ_2 within 1% of σ_1, and ‖P‖_F far above σ_1, which widens the float32 margin), the same
    matrix is done again in float64, and its bracket is the float64 path's, bitwise. A float64 capture
    never takes the float32 path."""
    calls: list[tuple[bool, int]] = []
    inner = causal._sigma_1_from

    def spy(
        x: torch.Tensor, fro2: torch.Tensor, *, single: bool, **more: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append((single, int(x.shape[0])))
        return inner(x, fro2, single=single, **more)

    monkeypatch.setattr(causal, "_sigma_1_from", spy)
    stack = torch.stack([softmax_head(300, kind, 300) for kind in ("broad", "identity", "sink")])
    x = stack.to(torch.float64)
    fro2 = torch.linalg.vector_norm(x, dim=(-2, -1)).square()
    first = inner(x, fro2, single=True)
    wide = ~(first[1] <= first[0] * (1 + causal.RTOL / 4))
    assert bool(wide[1]) and not bool(wide.all())  # the identity head, at least, is too wide in float32
    calls.clear()
    lower, upper = causal._sigma_1(x, fro2, single=True)
    assert calls == [(True, 3), (False, int(wide.sum()))]  # those matrices alone again
    again = inner(x[wide], fro2[wide], single=False)
    assert torch.equal(lower[wide], again[0]) and torch.equal(upper[wide], again[1])
    assert torch.equal(lower[~wide], first[0][~wide]) and torch.equal(upper[~wide], first[1][~wide])
    assert bool((upper <= lower * (1 + causal.RTOL / 4)).all())
    for p, lo, hi in zip(stack, lower.tolist(), upper.tolist(), strict=True):
        s1 = reference(p)[2]
        assert lo - 4 * 300 * EPS64 * s1 <= s1 <= hi + 4 * 300 * EPS64 * s1
    calls.clear()
    causal.brackets(x, torch.float64)
    assert calls and not any(single for single, _ in calls)


def _attentions(model: Any, batch: Any) -> list[torch.Tensor]:
    """Every layer's P (B, H, n, n) from the model's own eager forward."""
    model.set_attn_implementation("eager")
    model.config._attn_implementation = "eager"  # models that refuse the switch read it (Falcon)
    with torch.no_grad():
        out = model(**batch.inputs, output_attentions=True)
    return [a for a in out.attentions if a is not None]


@pytest.mark.parametrize("name", sorted(CASES["generic"]))
def test_every_head_of_the_conformance_decoders(name: str) -> None:
    case = CASES["generic"][name]
    batch = case.batch()
    lengths = batch.lengths if batch.lengths is not None else [None] * len(batch.names)
    heads = 0
    for probs in _attentions(case.build(), batch):
        for b, length in enumerate(lengths):
            n = int(length) if length is not None else int(probs.shape[-1])
            for p in probs[b, :, :n, :n]:
                heads += check(p.float(), must_decide=False)
    assert heads > 0


def test_tiny_llama_through_the_heads_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny Llama at 128 tokens (≥ MIN_TOKENS): summarize_heads takes the Lanczos path, and reports what it
    reports with that path turned off (the SVD path), head by head."""
    model = tiny_llama(num_attention_heads=4, num_key_value_heads=2)
    ids = torch.randint(3, 48, (1, 128), generator=torch.Generator().manual_seed(0))
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        probs = model(input_ids=ids, output_attentions=True).attentions
    for p in probs:
        mats = [p[0][None]]  # one sample (G=1, H, n, n)
        causal.reset_counts()
        fast = summarize_heads(mats, torch.float32, "svd")
        assert causal.counts()["decided"] > 0
        with monkeypatch.context() as m:
            m.setattr(causal, "applies", lambda x: False)
            slow = summarize_heads(mats, torch.float32, "svd")
        assert torch.equal(fast.below, slow.below)
        rtol = torch.clamp(8 * 128 * EPS64 * slow.reported, min=causal.RTOL)
        rtol = torch.where(slow.below, causal.RTOL, rtol)
        assert bool(((fast.reported - slow.reported).abs() <= rtol * slow.reported).all())
        for h in range(p.shape[1]):
            check(p[0, h], must_decide=False)


def test_previous_token_floor_proven_without_svd() -> None:
    """A previous-token head: P⁻¹ grows like (P_{i,i−1}/P_ii)^n and overflows float64's triangular solves;
    the floor is proven on a trailing block instead (before: only σ_n ≤ min P_ii, no floor)."""
    p = softmax_head(512, "previous", 512).to(torch.float64)
    n = int(p.shape[-1])
    fro2 = torch.linalg.vector_norm(p).square()
    from condcli.spectra.certify import _sigma_k_above

    assert float(_sigma_k_above(p[None], fro2[None])[0]) < U32 * math.sqrt(float(fro2))
    terms = bound_terms(p[None], torch.float32)
    assert bool(kappa_bounds(terms, n, torch.float32).floor[0])
    assert reference(p.float())[1]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 64),
    temperature=st.floats(0.0, 12.0),
    sink=st.floats(0.0, 10.0),
    diagonal=st.floats(0.0, 10.0),
    seed=st.integers(0, 2**16),
)
def test_brackets_property(n: int, temperature: float, sink: float, diagonal: float, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    s = temperature * torch.randn(n, n, generator=g, dtype=torch.float64)
    s[:, 0] += sink
    s += diagonal * torch.eye(n, dtype=torch.float64)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    check(torch.softmax(s.masked_fill(mask, -math.inf), -1).float(), must_decide=False)


def test_a_lower_triangular_matrix_that_is_not_probabilities_goes_to_the_svd() -> None:
    """A stack the path takes (lower triangular) with one matrix the brackets do not hold for (a negative
    entry: Collatz–Wielandt needs P ≥ 0): that one is the SVD path's, the others are decided, and the stack's
    summary has one form."""
    p = torch.stack([softmax_head(120, kind, 7) for kind in ("broad", "sink", "hot")])
    p[1, 50, 3] = -0.25
    assert causal.applies(p) and causal.eligible(p).tolist() == [True, False, True]
    causal.reset_counts()
    got = causal.summarize_causal(p, torch.float32)
    assert causal.counts() == {"decided": 2, "svd": 1}
    assert got.sigma.shape == (3, 2)
    for i in range(3):
        kappa, floor, _, _ = reference(p[i])
        assert bool(got.below_precision[i]) == floor
        assert float(got.reported[i]) == pytest.approx(kappa, rel=max(causal.RTOL, 8 * 120 * EPS64 * kappa))


def clustered_sink(n: int) -> torch.Tensor:
    """A sink head whose smallest singular values lie within 0.2% of each other (float32, n × n): every
    query puts almost all its weight on token 0 and a nearly even 1e-4 on each earlier key."""
    g = torch.Generator().manual_seed(0)
    w = torch.tril(1e-4 * torch.exp(2e-4 * torch.randn(n, n, generator=g, dtype=torch.float64)))
    w[:, 0] = 1.0
    return (w / w.sum(-1, keepdim=True)).float()


def test_a_clustered_sink_is_tried_again_with_more_steps_before_its_svd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first :data:`INVERSE_STEPS` leave σ_n of this head undecided (σ_{n−1} within 0.2%); the retry
    with :data:`RETRY_STEPS` decides it, so no SVD runs, and the κ is the SVD's. Below RETRY_TOKENS it goes
    to the SVD as before (there the SVD costs less than the steps)."""
    p = clustered_sink(512)[None]
    first = causal.decide(causal.brackets(p.double(), torch.float32), 512, torch.float32)
    assert not bool(first.ok[0])  # the case the retry is for
    kappa, floor, _, _ = reference(p[0])
    for tokens, counted in ((512, {"decided": 1, "svd": 0}), (513, {"decided": 0, "svd": 1})):
        monkeypatch.setattr(causal, "RETRY_TOKENS", tokens)
        causal.reset_counts()
        got = causal.summarize_causal(p, torch.float32)
        assert causal.counts() == counted
        assert not bool(got.below_precision[0]) and not floor
        assert float(got.kappa[0]) == pytest.approx(kappa, rel=max(causal.RTOL, 8 * 512 * EPS64 * kappa))


GLOBAL_KINDS = ["broad", "warm", "hot", "sink", "identity", "local", "windows", "repeated"]


@pytest.mark.parametrize("kind", GLOBAL_KINDS)
def test_global_attention_through_lu_factors_agrees_with_svd(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From LU_TOKENS on, a P that is not triangular takes the brackets through its LU factors: where they
    decide, the κ (or floor) is the SVD's; they hold the SVD's σ either way (``check``). LU_TOKENS is lowered
    here so that the matrices stay small; the next test runs at the real threshold."""
    monkeypatch.setattr(causal, "LU_TOKENS", 160)
    p = softmax_head(200, kind, 3, causal=False)
    assert causal.applies(p[None]) and bool(causal.eligible(p[None])[0])
    check(p, must_decide=kind not in ("broad", "repeated"))  # a decided verdict is the SVD's
    if kind == "repeated":
        assert reference(p)[1]  # two equal rows: the SVD's floor, which check held the brackets to


def test_global_attention_at_the_real_threshold() -> None:
    """At LU_TOKENS tokens a ViT-like stack of global heads is summarised by the LU path: every head decided
    or sent to the SVD and counted, every reported κ and floor flag the SVD path's."""
    n = causal.LU_TOKENS
    p = torch.stack([softmax_head(n, kind, 5, causal=False) for kind in ("warm", "hot", "sink")])
    assert causal.applies(p) and causal.eligible(p).all()
    assert not causal.applies(p[:, : n - 1, : n - 1])  # below the threshold global P keeps its SVD
    causal.reset_counts()
    got = causal.summarize_causal(p, torch.float32)
    assert causal.counts()["decided"] >= 2 and sum(causal.counts().values()) == 3
    for i in range(3):
        kappa, floor, _, _ = reference(p[i])
        assert bool(got.below_precision[i]) == floor
        assert float(got.reported[i]) == pytest.approx(kappa, rel=max(causal.RTOL, 8 * n * EPS64 * kappa))


def test_global_attention_that_is_not_probabilities_goes_to_the_svd(monkeypatch: pytest.MonkeyPatch) -> None:
    """A negative entry (Collatz–Wielandt needs P ≥ 0) or a NaN: that matrix is the SVD path's."""
    monkeypatch.setattr(causal, "LU_TOKENS", 160)
    p = torch.stack([softmax_head(180, kind, 9, causal=False) for kind in ("warm", "hot", "sink")])
    p[1, 50, 3] = -0.25
    assert causal.eligible(p).tolist() == [True, False, True]
    causal.reset_counts()
    got = causal.summarize_causal(p, torch.float32)
    assert causal.counts() == {"decided": 2, "svd": 1}
    kappa, floor, _, _ = reference(p[1])
    assert bool(got.below_precision[1]) == floor
    assert float(got.reported[1]) == pytest.approx(kappa, rel=max(causal.RTOL, 8 * 180 * EPS64 * kappa))
