"""The bounds that spare a causal head its decomposition (condcli/spectra/causal.py ``bound_only``,
``sketch_sigma_n``, ``quick_sigma_n``; certify.sharpened; headmax._sharpened), against float64 SVD: each
bound holds, is not vacuous, and a layer's maxima are bitwise those of decomposing every head."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from condcli.analysis.headmax import head_maxima
from condcli.spectra import causal, certify
from condcli.spectra._tensor import EPS64
from condcli.spectra.certify import bound_terms, kappa_bounds
from tests.test_headmax import full_path
from tests.test_spectra_causal import KINDS, reference, softmax_head

CONVERGED = ("broad", "local", "identity")  # heads whose (PPᵀ)⁻¹ Lanczos converges within QUICK_STEPS


@pytest.mark.parametrize("n", [96, 300])
@pytest.mark.parametrize("kind", KINDS)
def test_sketch_and_quick_bounds_lie_below_sigma_n(kind: str, n: int) -> None:
    p = softmax_head(n, kind, n)
    x = p.double()[None]
    fro2 = x.square().sum((-2, -1))
    _, _, s1, sn = reference(p)
    slack = 4 * n * EPS64 * s1  # the reference SVD's own error
    sketch = float(causal.sketch_sigma_n(x, fro2, causal._Solver.of(x, fro2, True))[0])
    quick = float(causal.quick_sigma_n(x, fro2, lower=True)[0])
    assert 0 <= sketch <= sn + slack and 0 <= quick <= sn + slack
    if kind in CONVERGED:  # not vacuous
        assert quick >= 0.5 * sn and sketch >= 0.01 * sn


@pytest.mark.parametrize("kind", KINDS)
def test_bound_only_brackets_hold_and_bound_what_the_svd_path_reports(kind: str) -> None:
    """σ_1 (Collatz–Wielandt where the float32 Krylov space leaves it wide), σ_n's floor proof and sketch
    bracket SVD's σ; kappa_lo ≤ the reported κ (or floor) ≤ kappa_hi."""
    n = 300
    p = softmax_head(n, kind, n + 1)
    x = p.double()[None]
    kappa, _, s1, sn = reference(p)
    slack = 4 * n * EPS64 * s1
    _, s1_lo, s1_hi, sn_lo, sn_hi = causal.brackets(x, torch.float32, lower=True, bound_only=True)[0].tolist()
    assert s1_lo - slack <= s1 <= s1_hi + slack and sn_lo - slack <= sn <= sn_hi + slack
    bounds = kappa_bounds(bound_terms(x, torch.float32), n, torch.float32)
    assert float(bounds.kappa_lo[0]) <= kappa <= float(bounds.kappa_hi[0])


def test_the_sketch_holds_for_every_seed_of_its_vectors() -> None:
    """The sketch's bound holds but for a chance of BOUND_RISK over its Gaussian vectors: over 40 draws on
    a head whose P⁻¹ has one dominant direction and on one whose large σ of P⁻¹ cluster, none fails."""
    for kind in ("broad", "local"):
        p = softmax_head(200, kind, 3)
        x = p.double()[None]
        fro2 = x.square().sum((-2, -1))
        sn = reference(p)[3]
        solver = causal._Solver.of(x, fro2, True)
        for seed in range(40):
            got = float(causal.sketch_sigma_n(x, fro2, solver, seed)[0])
            assert 0 < got <= sn * (1 + 1e-9)


def layer_head(n: int, scale: float, sink: float) -> torch.Tensor:
    """A causal softmax P (n, n) in float32: scores of standard deviation ``scale``, plus ``sink`` on the
    first key."""
    g = torch.Generator().manual_seed(7)
    s = torch.randn(n, n, generator=g, dtype=torch.float64) * scale
    s[:, 0] += sink
    return torch.softmax(s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf), -1).float()


def test_a_sink_is_sharpened_then_spared_and_the_maxima_are_the_svd_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One floor head (κ 1.15e7), a sink that is no floor (κ 2.8e6: the sketch proves nothing of it), a
    head the sketch spares (κ 9.4e5) and a broad one: only the sink is sharpened, only the floor is
    decided (from its own brackets), and κ, μ and the flag are bitwise those of decomposing every head."""
    n = 120
    heads = [layer_head(n, 0.3, 0), layer_head(n, 0.2, 6), layer_head(n, 0.2, 5), layer_head(n, 0.02, 0)]
    floors = [reference(h)[1] for h in heads]
    assert floors == [True, False, False, False]
    mats = [torch.stack(heads)[None]]  # (S=1, G=1, H=4, n, n) as a list of samples
    ka = torch.tensor([[3.0]], dtype=torch.float64)
    kv = torch.ones(4, dtype=torch.float64)
    seen: list[float] = []
    inner = certify.sharpened

    def spy(x: torch.Tensor, dtype: Any, terms: torch.Tensor) -> torch.Tensor:
        seen.append(float(terms[0, 0]))  # ‖P‖_F² names the head
        return inner(x, dtype, terms)

    monkeypatch.setattr(certify, "sharpened", spy)
    got = head_maxima(mats, torch.float32, "svd", ka, kv)
    assert got is not None
    assert seen == pytest.approx([float(heads[1].double().square().sum())], rel=1e-12)
    assert got.decomposed == 1
    kappa, floor, mu = full_path(mats, torch.float32, "svd", ka, kv)
    assert torch.equal(got.kappa, kappa) and torch.equal(got.floor, floor) and torch.equal(got.mu, mu)
    # a κ(W_V) ten times larger on the sink's head: its μ bound then lies above the floor's, and it is
    # decomposed; the maxima are still the full path's
    kv = torch.tensor([1.0, 10.0, 1.0, 1.0], dtype=torch.float64)
    got = head_maxima(mats, torch.float32, "svd", ka, kv)
    assert got is not None and got.decomposed == 2
    kappa, floor, mu = full_path(mats, torch.float32, "svd", ka, kv)
    assert torch.equal(got.kappa, kappa) and torch.equal(got.floor, floor) and torch.equal(got.mu, mu)


def test_a_bound_on_sigma_1_is_never_kept_as_a_bracket_to_report_from() -> None:
    """A sharp head's float32 σ_1 bracket is wide; bound-only mode puts Collatz–Wielandt's bound in place
    of the float64 Krylov space, never narrower than RTOL/2, and keeps no bracket of that head for the
    decomposition to reuse; a floor whose float32 bracket is tight is kept. Reading the float32 capture in
    place of the float64 copy gives a floor the same terms, bitwise."""
    for kind, kept_one in (("identity", False), ("warm", True)):
        p = softmax_head(300, kind, 300)
        x = p.double()[None]
        _, _, s1, _ = reference(p)
        kept: list[torch.Tensor] = []
        terms = bound_terms(x, torch.float32, kept)
        read = bound_terms(x, torch.float32, None, p[None])
        if kept_one:  # a floor: σ_1's Krylov space from the capture, bitwise
            assert torch.equal(terms, read)
        else:  # σ_1 from products with 1 in float32: other bounds, as sound
            assert float(read[0, 4]) <= s1 * (1 + 1e-12) <= float(read[0, 3]) * (1 + 1e-12)
        assert bool(torch.isfinite(kept[0]).all()) == kept_one
        _, s1_lo, s1_hi, _, _ = causal.brackets(x, torch.float32, lower=True, bound_only=True)[0].tolist()
        slack = 4 * 300 * EPS64 * s1
        assert s1_lo - slack <= s1 <= s1_hi + slack
        if not kept_one:
            assert s1_hi >= s1_lo * (1 + causal.RTOL / 2)
