"""κ(P) of causal attention in O(n²) a step: Lanczos brackets on σ_1 and σ_n, no n × n decomposition.

Causal attention (and sliding-window or block-causal attention: banded) gives a lower-triangular P ≥ 0:
products with P, Pᵀ, P⁻¹ and P⁻ᵀ each cost O(n²), and σ_n(P) = 1/‖P⁻¹‖₂ (a zero on the diagonal makes P
singular, a floor the floor proof settles at once). Global attention's P, square but not triangular, takes
the same path from :data:`LU_TOKENS` tokens on: its LU factors (partial pivoting, O(n³/3) once, a third of
its SVD's cost or less) stand in for the triangular solves, so that P⁻¹ and P⁻ᵀ again cost O(n²) a
product, and the floor proof takes x = P⁻¹b from them (no diagonal and no trailing blocks: those bound
σ_n of triangular matrices only); every bound below holds whatever the factors' error, which enters only
through the solves' backward error (:class:`_Solver`). For one n × n matrix (float64, upcast exactly from the
capture; u_64 = eps64/2, γ_n = n·u_64/(1 − n·u_64), every product of P with a vector z off by at most
γ_n·|P||z| entry-wise, Higham Thm 3.5), and for unit vectors ū, v̄ with ρ = ūᵀPv̄ and ε² = (‖Pv̄ − ρū‖² +
‖Pᵀū − ρv̄‖²)/2 (the residual of the Rayleigh quotient of J = [[0, P], [Pᵀ, 0]] at [ū; v̄]/√2; J's
eigenvalues are ±σ_i), the Kato–Temple inequality brackets the one eigenvalue of J in an interval around ρ
quadratically in ε. Products, norms and dots add at most δ = γ_n(‖P|v̄|‖ + ‖Pᵀ|ū|‖) + 4(n + 2)·u_64·(‖Pv̄‖ +
‖Pᵀū‖) to ρ and ε, taken against every bound (for σ_1's pair ‖P|v̄|‖ ≤ ‖P‖_F stands in).

- **σ_1.** Lanczos on PᵀP (two products a step) from the all-ones vector gives the Ritz vector y (v̄ = y,
  ū = Py/‖Py‖) and the second Ritz value θ_2 with its residual estimate r_2. From below, proven: σ_1 ≥
  max(‖Pv̄‖, ‖Pᵀū‖) − δ (any unit vector gives a lower bound). From above: Kato–Temple on (α, ∞) with α =
  (θ_2 + r_2)^{1/2} ≥ σ_2 (the Krylov assumption below), σ_1 ≤ ρ + ε²/(ρ − α); and where that is not within
  :data:`RTOL`, Collatz–Wielandt, proven: v = |y| (floored at 1e-30 of its largest entry) and two power steps
  make it positive, and σ_1² ≤ maxᵢ (PᵀPv)ᵢ/vᵢ (PᵀP ≥ 0), the products of non-negative numbers within
  γ_{2n} each.
- **σ_n from above, proven** (this proves floors). The floor proof of :mod:`condcli.spectra.certify` (x =
  P⁻¹b and a step of inverse iteration, on trailing blocks where the solves overflow), and σ_n ≤
  min(‖Pv̄‖, ‖Pᵀū‖) + δ for the pair below.
- **σ_n from below.** Lanczos on (PPᵀ)⁻¹ = P⁻ᵀP⁻¹ (two triangular solves a step, or two with LU factors) from
  a fixed Gaussian vector gives its two largest Ritz values θ_1 ≥ θ_2 with residual estimates r_1, r_2, and
  the Ritz vector u of θ_1 (≈ P's left singular vector of σ_n). v̄ = P⁻¹u and ū = P⁻ᵀv̄ (normalised; the
  solves damp u's error along the other singular vectors by σ_n/σ_j), and Kato–Temple on (0, β) gives σ_n ≥ ρ
  − ε²/(β − ρ) for β = (θ_2 + r_2)^{−1/2} ≤ σ_{n−1}, less a margin for the solves' backward error, where β >
  ρ. Where it is not (σ_{n−1} too close to σ_n), the first-order σ_n ≥ (θ_1 + r_1)^{−1/2} stands instead: too
  wide to report a κ from, narrow enough to spare a head its SVD where only a layer's maximum is wanted
  (:mod:`condcli.analysis.headmax`).

**What rests on the Krylov space** (the only part of the certificate that is not a proof; floors never rest
on it): that Lanczos from its start vector has not missed an eigenvalue above the two largest it found, i.e.
λ_1 ≤ θ_1 + r_1 and λ_2 ≤ θ_2 + r_2, for PᵀP (σ_1's Kato–Temple side) and for (PPᵀ)⁻¹ (σ_n's lower bound).
A start vector misses a dominant eigenvalue only when it is nearly orthogonal to its eigenvector (the
all-ones start for PᵀP ≥ 0 is not: its Perron vector is non-negative), and Kuczyński–Woźniakowski (1992)
bound the chance that k steps from a random start underestimate λ_1 by a factor 1 − ε by
1.648·√n·e^{−√ε(2k−1)}.

**Bounds only** (``bound_only``: :mod:`condcli.analysis.headmax` sparing heads that cannot set a layer's
maximum): σ_1 of a head that is no floor from two products with the all-ones vector (:func:`_sigma_1_norms`),
a floor's float32 bracket where it is wide with Collatz–Wielandt's proven upper bound and no float64
Krylov space, and σ_n⁻ from a sketch (:func:`sketch_sigma_n`, one solve with 16 random
right-hand sides), narrowed where needed by 24 Lanczos steps without convergence (:func:`quick_sigma_n`).
Each of the two holds but for a chance of :data:`BOUND_RISK` over its random vectors, and neither needs the
Krylov assumption above; neither is reported.

A matrix is **decided** here where its SVD path's verdict is proven (σ_n > tol or σ_n ≤ tol certainly, with
tol's own bounds and the SVD's σ̂ slack: :func:`condcli.spectra.certify.kappa_bounds`) and the value is tight:
a measurement's κ bracket [σ_1⁻/σ_n⁺, σ_1⁺/σ_n⁻] and a floor's σ_1 bracket within :data:`RTOL` relative (or,
where float64 SVD's own error bound 4n·eps64·κ is wider, within that: an SVD would not tell it better; a head
that close to the capture's floor has a relative uncertainty of u·κ, far wider still). A matrix left undecided
is tried once more with :data:`RETRY_STEPS` Lanczos steps on (PPᵀ)⁻¹ where n ≥ :data:`RETRY_TOKENS` (a sink
head whose smallest σ cluster needs them to tell σ_n from σ_{n−1}); every other matrix goes to the SVD path,
and :func:`counts` says how many did.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass

import torch

from condcli.spectra._tensor import EPS64, machine_eps
from condcli.spectra.core import SpectrumSummary, floor_kappa, summarize, upcast
from condcli.spectra.floor_proof import _floored, _resolved, _sigma_k_above, _tolerance, lu_sigma_k_above
from condcli.spectra.lanczos import Ritz, top_ritz
from condcli.spectra.strategies import run_grouped
from condcli.spectra.uncertainty import rel_of

RTOL = 1e-8  # the stated relative error of a κ decided here (half the width of its proven bracket)
MIN_TOKENS = 96  # below this an n × n SVD costs less than the Lanczos steps' Python overhead
TOP_STEPS = 40  # most Lanczos steps on PᵀP (σ_1: σ_2/σ_1 ≈ 0.3 to 0.8 for attention, a few dozen suffice)
INVERSE_STEPS = 60  # most Lanczos steps on (PPᵀ)⁻¹ (σ_n)
# a matrix these steps leave undecided (a sink head: its smallest σ lie within 1e-4 of each other, and
# Lanczos needs more steps to tell σ_n from σ_{n−1}) is tried once more with this many, where n is long
# enough that they cost less than its SVD (at n = 512 a sink head took 2.3 s at 200 steps against 0.4 s for
# the SVD; at 2,048 the SVD takes 30–45 s: docs/performance.md)
RETRY_STEPS = 300
RETRY_TOKENS = 1024
# a square P that is not triangular (global attention) is taken here from this many tokens on: its LU factors
# cost O(n³/3) once and every step after them O(n²), about a third of its SVD at 1,521 tokens and under half
# at 4,096 (docs/performance.md); below, the SVD costs less
LU_TOKENS = 1024
# where only a bound on σ_n is wanted (:mod:`condcli.analysis.headmax` sparing a head its decomposition): a
# solve with this many random right-hand sides (:func:`sketch_sigma_n`), then, where that is too wide, this
# many Lanczos steps on (PPᵀ)⁻¹ without convergence (:func:`quick_sigma_n`); each bound holds but for a chance
# of BOUND_RISK over its random vectors, which are drawn independently of P
SKETCH_COLUMNS = 16
QUICK_STEPS = 24
BOUND_RISK = 1e-12
TRIANGLE_ROWS = 128  # rows a block when testing triangularity (128 to 512 alike at 2,048 tokens)
POWER_STEPS = 2  # power steps on PᵀP after the Ritz vector, before Collatz–Wielandt
# σ_1's Krylov space from a float32 capture is built in float32 (a product with P costs a quarter of
# float64's at 2,048 tokens), to this residual: its Ritz vector is then within about 1e-6 of σ_1's, and the
# float64 certificate, quadratic in that error, within 1e-11 (docs/performance.md)
SINGLE_RTOL = 1e-6
_U = EPS64 / 2
_EPS32 = torch.finfo(torch.float32).eps
_U32 = _EPS32 / 2

_counts = {"decided": 0, "svd": 0}
_lock = threading.Lock()


def counts() -> dict[str, int]:
    """How many matrices :func:`summarize_causal` decided in O(n²) and how many went to the SVD path since
    :func:`reset_counts` (the bench prints the share)."""
    with _lock:
        return dict(_counts)


def tally(decided: int, svd: int) -> None:
    """Add to :func:`counts`."""
    with _lock:
        _counts["decided"] += decided
        _counts["svd"] += svd


def reset_counts() -> None:
    """Zero :func:`counts`."""
    with _lock:
        for key in _counts:
            _counts[key] = 0


def applies(x: torch.Tensor) -> bool:
    """Whether :func:`summarize_causal` takes the stack ``x`` (..., n, n): square, n ≥ :data:`MIN_TOKENS`,
    and zero above the diagonal wherever it is not NaN (causal, sliding-window or block-causal attention),
    or any square stack from :data:`LU_TOKENS` on (global attention, through LU factors). Each matrix is
    then decided here only where it is :func:`eligible`; the stack's summary has the same form either way,
    so the heads of one layer are summarised alike whatever chunk they fall in."""
    if x.dim() < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < MIN_TOKENS or x.numel() == 0:
        return False
    if x.shape[-1] >= LU_TOKENS:
        return True
    if bool(triangular(x).all()):
        return True
    upper = x.triu(1)
    return bool(((upper == 0) | upper.isnan()).all())


def eligible(x: torch.Tensor) -> torch.Tensor:
    """(...,) bool: the matrices of ``x`` (..., n, n) the brackets hold for: finite and non-negative
    (attention probabilities), and lower triangular or at least :data:`LU_TOKENS` wide. A zero on a
    triangular P's diagonal (a query whose own key's weight underflowed) makes it exactly singular: the
    floor proof's σ_n ≤ min|P_ii| = 0 settles it."""
    if x.shape[-1] >= LU_TOKENS:
        return finite_non_negative(x)
    return triangular(x) & finite_non_negative(x)


def triangular(x: torch.Tensor) -> torch.Tensor:
    """(...,) bool: the matrices of ``x`` (..., n, n) that are zero above the diagonal. Counted a block of
    :data:`TRIANGLE_ROWS` rows at a time, on views: no copy of the matrix (``triu`` made one, 32 MiB a
    head at 2,048 tokens in float64, 5× the count's own time)."""
    n = x.shape[-1]
    count = torch.zeros(x.shape[:-2], dtype=torch.int64, device=x.device)
    for i0 in range(0, n, TRIANGLE_ROWS):
        i1 = min(i0 + TRIANGLE_ROWS, n)
        count += torch.count_nonzero(x[..., i0:i1, i0:i1].triu(1), dim=(-2, -1))
        if i1 < n:
            count += torch.count_nonzero(x[..., i0:i1, i1:], dim=(-2, -1))
    return count == 0


def brackets(
    x: torch.Tensor,
    capture_dtype: torch.dtype | str,
    inverse_steps: int = INVERSE_STEPS,
    *,
    lower: bool | None = None,
    bound_only: bool = False,
    fro2: torch.Tensor | None = None,
    low: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x`` (..., n, n) float64 non-negative, lower triangular with a positive diagonal or (from
    :data:`LU_TOKENS` on) any square, captured in ``capture_dtype`` → (..., 5): ‖x‖_F², and proven bounds
    σ_1⁻, σ_1⁺, σ_n⁻ (Krylov-certified: the module docstring; 0 where none), σ_n⁺. The floor proof comes
    first; σ_n's Lanczos runs only where it proves no floor. A batchable op: one matrix or a stack.
    ``lower``: whether every matrix is known to be lower triangular (a caller that checked; else checked
    here: a pass over n² entries that costs a fifth of a head's brackets at 2,048 tokens). ``bound_only``:
    σ_n⁻ from :func:`sketch_sigma_n` in place of Lanczos (and σ_n⁺ from the floor proof alone), a bound to
    spare a head its decomposition where only a layer's maximum is wanted, too wide to report a κ from
    (:func:`quick_sigma_n` narrows it further). ``fro2``: ‖x‖_F² where the caller has it; ``low``: x in
    float32 where the caller has it exactly (a float32 capture itself: no copy for σ_1's Krylov space)."""
    lead = x.shape[:-2]
    n = int(x.shape[-1])
    flat = x.reshape(-1, n, n)
    if fro2 is None:
        fro2 = torch.linalg.vector_norm(flat, dim=(-2, -1)).square()
    else:  # the caller's ‖x‖_F² (a pass over n² entries fewer)
        fro2 = fro2.reshape(-1)
    single = machine_eps(capture_dtype) >= _EPS32
    low = None if low is None or not single else low.reshape(-1, n, n)
    if bound_only:  # σ_1's Krylov space only for the floors, below
        s1_lo, s1_hi = _sigma_1_norms(flat if low is None else low)
    else:
        s1_lo, s1_hi = _sigma_1(flat, fro2, single=single, low=low)
    solver = _Solver.of(flat, fro2, lower)
    sn_hi = _sigma_k_above(flat, fro2) if solver.lu is None else lu_sigma_k_above(flat, fro2, solver.lu)
    sn_lo = torch.zeros_like(sn_hi)
    rest = ~_floored(sn_hi, _tolerance(fro2, s1_hi, n, machine_eps(capture_dtype) / 2))
    if bound_only and not bool(rest.all()):  # a floor's κ is σ_1/tol: its σ_1 to the bracket's precision
        floors = ~rest
        every = bool(floors.all())

        def pick(t: torch.Tensor) -> torch.Tensor:  # no copy where every matrix is a floor
            return t if every else t[floors]

        got = _sigma_1(
            pick(flat), fro2[floors], single=single, bound_only=True, low=None if low is None else pick(low)
        )
        s1_lo, s1_hi = s1_lo.clone(), s1_hi.clone()
        s1_lo[floors], s1_hi[floors] = got
    if bool(rest.any()):
        every = bool(rest.all())
        part, sub = (flat, solver) if every else (flat[rest], solver.subset(rest))  # no copy where every
        if bound_only:
            lo, hi = sketch_sigma_n(part, fro2[rest], sub), torch.full_like(fro2[rest], torch.inf)
        else:
            lo, hi = _sigma_n(part, fro2[rest], sub, inverse_steps)
        sn_lo[rest] = lo
        sn_hi[rest] = torch.minimum(sn_hi[rest], hi)
    out = torch.stack([fro2, s1_lo, s1_hi, sn_lo, sn_hi], -1)
    return out.reshape(*lead, 5)


def _sigma_1_norms(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(lower, upper) bounds on σ_1 of non-negative matrices (B, n, n), from two products with the all-ones
    vector 1 and no Krylov space: c = Pᵀ1 and r = P1 give σ_1 ≥ max(‖c‖, ‖r‖)/√n and σ_1 ≤ (‖P‖_1·‖P‖_∞)^½ =
    (max c · max r)^½, each product of non-negative terms within γ_n of x's dtype entry by entry (Higham
    Thm 3.5), and each norm within γ_n more. For a causal softmax P within 1.6× (a broad head) and tight
    for a sink: a bound to spare a head, not a bracket to report."""
    n = x.shape[-1]
    u = torch.finfo(x.dtype).eps / 2
    gamma = n * u / (1 - n * u) if n * u < 0.5 else float("inf")
    ones = torch.ones(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)
    c = (x.mT @ ones).to(torch.float64)
    r = (x @ ones).to(torch.float64)
    upper = (c.amax((-2, -1)) * r.amax((-2, -1))).sqrt() * (1 + gamma) * (1 + 2 * _U)
    norms = torch.maximum(
        torch.linalg.vector_norm(c, dim=(-2, -1)), torch.linalg.vector_norm(r, dim=(-2, -1))
    )
    lower = (norms / n**0.5 * (1 - 2 * gamma)).clamp_min(0)
    return lower, upper


@dataclass(frozen=True)
class _Solver:
    """Solves with a stack of matrices (B, n, n): triangular solves where every one is lower triangular,
    else with their LU factors (partial pivoting). ``margin`` (B,) bounds the 2-norm of the backward error
    of one solve: (P + ΔP)x̂ = b with ‖ΔP‖₂ ≤ γ_n‖P‖_F for a triangular solve (Higham Thm 8.5) and
    ≤ γ_{3n}‖L̂‖_F‖Û‖_F for one with LU factors (Thm 9.4: |ΔP| ≤ γ_{3n}|L̂||Û|)."""

    x: torch.Tensor
    lu: tuple[torch.Tensor, torch.Tensor] | None
    margin: torch.Tensor

    @staticmethod
    def of(x: torch.Tensor, fro2: torch.Tensor, lower: bool | None = None) -> _Solver:
        """The solver of ``x`` with ‖x‖_F² ``fro2``; ``lower``: as :func:`brackets` takes it."""
        n = x.shape[-1]
        if lower if lower is not None else bool(triangular(x).all()):
            return _Solver(x, None, n * _U / (1 - n * _U) * fro2.sqrt())
        # a zero pivot: the solves overflow, and the SVD decides
        factors, pivots, _ = torch.linalg.lu_factor_ex(x)
        l2 = torch.linalg.vector_norm(factors.tril(-1), dim=(-2, -1)).square() + n  # L̂'s unit diagonal
        u2 = torch.linalg.vector_norm(factors.triu(), dim=(-2, -1)).square()
        gamma = 3 * n * _U / (1 - 3 * n * _U)
        return _Solver(x, (factors, pivots), gamma * (l2 * u2).sqrt())

    def subset(self, keep: torch.Tensor) -> _Solver:
        lu = None if self.lu is None else (self.lu[0][keep], self.lu[1][keep])
        return _Solver(self.x[keep], lu, self.margin[keep])

    def solve(self, r: torch.Tensor, *, adjoint: bool = False) -> torch.Tensor:
        """P⁻¹r (P⁻ᵀr where ``adjoint``), r (B, n, 1)."""
        if self.lu is not None:
            out: torch.Tensor = torch.linalg.lu_solve(*self.lu, r, adjoint=adjoint)
        else:
            out = torch.linalg.solve_triangular(self.x.mT if adjoint else self.x, r, upper=adjoint)
        return out


def _sigma_1(
    x: torch.Tensor,
    fro2: torch.Tensor,
    *,
    single: bool = False,
    bound_only: bool = False,
    low: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(lower, upper) bounds on σ_1 of non-negative matrices (B, n, n) with ‖x‖_F² ``fro2`` (the module
    docstring). ``single``: the matrices were captured in float32 or coarser, so that their float32 copy is
    exact: the Krylov space is built from that copy first (:data:`SINGLE_RTOL`), and again in float64 for
    the matrices whose bracket it leaves wider than :data:`RTOL`; every bound takes float64 products.
    ``bound_only``: not again, Collatz–Wielandt's bound instead where the first bracket is wider (a sharp
    head's σ_2 lies within 1% of σ_1: its float64 Krylov space costs more than the rest of its bounds),
    never narrower than RTOL/2 there, so that it is never taken for the bracket it stands in for
    (:func:`condcli.spectra.certify.bound_terms` keeps a bracket to report from only within RTOL/4).
    ``low``: x in float32 (exact), the float32 Krylov space's matrix where given."""
    if not single:
        return _sigma_1_from(x, fro2, single=False)
    lower, upper = _sigma_1_from(x, fro2, single=True, collatz=bound_only, low=low)
    if bound_only:
        return lower, upper
    again = ~(upper <= lower * (1 + RTOL / 4))
    if bool(again.any()):
        lower, upper = lower.clone(), upper.clone()
        lower[again], upper[again] = _sigma_1_from(x[again], fro2[again], single=False)
    return lower, upper


def _sigma_1_from(
    x: torch.Tensor,
    fro2: torch.Tensor,
    *,
    single: bool,
    collatz: bool = False,
    low: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_sigma_1` from one Krylov space: built in float32 where ``single`` (from ``low`` where given),
    else in float64; with Collatz–Wielandt's bound where Kato–Temple's is not within :data:`RTOL` unless
    ``single`` (the caller then builds the space again in float64) or ``collatz`` (then never narrower than
    RTOL/2 where ``single``: a bound, not the bracket the float64 space would give)."""
    n = x.shape[-1]

    def gram(v: torch.Tensor) -> torch.Tensor:
        return x.mT @ (x @ v)

    if single:
        low = x.to(torch.float32) if low is None else low
        start = torch.ones(x.shape[0], n, 1, dtype=low.dtype, device=x.device)
        ritz = top_ritz(lambda v: low.mT @ (low @ v), start, TOP_STEPS, (SINGLE_RTOL, 1e-2))
        # its products are those of PᵀP + E, ‖E‖₂ ≤ (2γ_n + γ_n²)‖P‖_F² in float32 (Higham Thm 3.5): the
        # Krylov assumption λ_2 ≤ θ_2 + r_2 is taken for that operator, widened by as much
        gamma = n * _U32 / (1 - n * _U32)
        vectors = ritz.vectors.to(x.dtype)
        second = (ritz.values[:, 1] + ritz.residuals[:, 1]).to(x.dtype) + (2 * gamma + gamma**2) * fro2
    else:
        start = torch.ones(x.shape[0], n, 1, dtype=x.dtype, device=x.device)
        ritz = top_ritz(gram, start, TOP_STEPS, (1e-8, 1e-2))
        vectors = ritz.vectors
        second = ritz.values[:, 1] + ritz.residuals[:, 1]
    y = vectors[:, :, :1]
    y = y * torch.where(y.sum((-2, -1), keepdim=True) < 0, -1.0, 1.0)
    pair = _pair(x, x @ y, y, fro2)  # u = Py damps y's error along v_j by σ_j/σ_1
    # Kato–Temple on (α, ∞), α ≥ σ_2 (Krylov); Collatz–Wielandt (proven) where that is not tight
    alpha = second.clamp_min(0).sqrt() * (1 + 1e-6)
    if n == 1:
        alpha = torch.zeros_like(alpha)
    gap = pair.rho - pair.delta - alpha
    temple = pair.rho + pair.delta + (pair.eps + pair.delta).square() / gap
    upper = torch.where((gap > 0) & torch.isfinite(temple), temple, torch.inf)
    lower = torch.maximum(pair.norm_p, pair.norm_pt) - pair.delta
    if not bool((upper <= lower * (1 + RTOL / 4)).all()) and (collatz or not single):
        v = y.clamp_min(0)
        v = v.clamp_min(1e-30 * v.amax(-2, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny))
        for _ in range(POWER_STEPS):
            v = gram(v)
            v = v / v.amax(-2, keepdim=True)
        w = gram(v)
        wielandt = ((w / v).amax((-2, -1)) * (1 + 2 * (2 * n + 2) * _U)).sqrt() * (1 + EPS64)
        if single:  # a bound in place of the float64 space's bracket, where that is wide: never as narrow
            wide = ~(upper <= lower * (1 + RTOL / 4))
            bound = torch.maximum(torch.minimum(wielandt, upper), lower * (1 + RTOL / 2))
            upper = torch.where(wide, bound, upper)
        else:
            upper = torch.minimum(wielandt, upper)
    good = torch.isfinite(upper) & torch.isfinite(lower)
    return torch.where(good, lower, 0.0), torch.where(good, upper, torch.inf)


@dataclass(frozen=True)
class _Pair:
    """A pair of unit vectors ū, v̄ (left, right) and what the certificate takes from them, each (B,)."""

    rho: torch.Tensor  # ūᵀPv̄
    eps: torch.Tensor  # ((‖Pv̄ − ρū‖² + ‖Pᵀū − ρv̄‖²)/2)^½
    norm_p: torch.Tensor  # ‖Pv̄‖
    norm_pt: torch.Tensor  # ‖Pᵀū‖
    delta: torch.Tensor  # the rounding of all of these, at most


def _pair(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, fro2: torch.Tensor | None = None) -> _Pair:
    """The certificate's quantities for the left and right vectors ``u``, ``v`` (B, n, 1), normalised here
    (the module docstring). With ``fro2`` (‖x‖_F²), ‖P|v̄|‖ and ‖Pᵀ|ū|‖ are bounded by ‖P‖_F instead of
    computed: two products fewer, as tight as needed next to σ_1."""
    n = x.shape[-1]
    u = u / torch.linalg.vector_norm(u, dim=(-2, -1), keepdim=True)
    v = v / torch.linalg.vector_norm(v, dim=(-2, -1), keepdim=True)
    a, b = x @ v, x.mT @ u
    rho = (u * a).sum((-2, -1))
    r1 = torch.linalg.vector_norm(a - rho[:, None, None] * u, dim=(-2, -1))
    r2 = torch.linalg.vector_norm(b - rho[:, None, None] * v, dim=(-2, -1))
    norm_a = torch.linalg.vector_norm(a, dim=(-2, -1))
    norm_b = torch.linalg.vector_norm(b, dim=(-2, -1))
    gamma = n * _U / (1 - n * _U)
    if fro2 is not None:
        spread = 2 * fro2.sqrt()
    else:
        spread = torch.linalg.vector_norm(x @ v.abs(), dim=(-2, -1)) + torch.linalg.vector_norm(
            x.mT @ u.abs(), dim=(-2, -1)
        )
    delta = gamma * spread + 4 * (n + 2) * _U * (norm_a + norm_b)
    return _Pair(rho, ((r1.square() + r2.square()) / 2).sqrt(), norm_a, norm_b, delta)


def _inverse_ritz(x: torch.Tensor, solver: _Solver, steps: int, rtol: tuple[float, float]) -> Ritz:
    """Lanczos on (PPᵀ)⁻¹ = P⁻ᵀP⁻¹ of the matrices (B, n, n) ``solver`` solves with (two solves a step), from
    one fixed Gaussian start vector (seed 0) for every matrix: :func:`~condcli.spectra.lanczos.top_ritz`."""
    batch, n, _ = x.shape
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(n, 1, generator=gen, dtype=x.dtype).to(x.device).expand(batch, n, 1).clone()

    def inverse_gram(v: torch.Tensor) -> torch.Tensor:  # (PPᵀ)⁻¹v = P⁻ᵀ(P⁻¹v)
        return solver.solve(solver.solve(v), adjoint=True)

    return top_ritz(inverse_gram, start, steps, rtol)


def _sigma_n(
    x: torch.Tensor, fro2: torch.Tensor, solver: _Solver, steps: int = INVERSE_STEPS
) -> tuple[torch.Tensor, torch.Tensor]:
    """(lower, upper) bounds on σ_n of matrices (B, n, n) with ‖x‖_F² ``fro2`` that ``solver`` solves with
    (the module docstring): the lower one Krylov-certified (0 where the bracket does not apply), the upper
    one proven (inf where none)."""
    batch, n, _ = x.shape
    zero = torch.zeros(batch, dtype=x.dtype, device=x.device)
    inf = torch.full_like(zero, torch.inf)
    ritz = _inverse_ritz(x, solver, steps, (1e-10, 1e-2))
    if not bool(torch.isfinite(ritz.values).all()):
        return zero, inf
    u = ritz.vectors[:, :, :1]
    # v = P⁻¹u damps u's error along u_j by σ_n/σ_j, and u = P⁻ᵀv once more
    v = solver.solve(u)
    v = v / torch.linalg.vector_norm(v, dim=(-2, -1), keepdim=True)
    pair = _pair(x, solver.solve(v, adjoint=True), v)
    upper = torch.minimum(pair.norm_p, pair.norm_pt) + pair.delta
    tiny = torch.finfo(x.dtype).tiny

    def below(theta: torch.Tensor) -> torch.Tensor:
        """σ ≥ this where λ ≤ ``theta`` (the Krylov assumption), less the solves' backward error."""
        return (1 - 1e-6) * theta.clamp_min(tiny).rsqrt() - 2 * solver.margin

    beta = below(ritz.values[:, 1] + ritz.residuals[:, 1])  # β ≤ σ_{n−1}
    if n == 1 or ritz.steps < 2:
        beta = inf
    gap = beta - pair.rho - pair.delta
    temple = pair.rho - pair.delta - (pair.eps + pair.delta).square() / gap
    temple = torch.where((gap > 0) & torch.isfinite(temple), temple, zero)
    # where σ_{n−1} is too close for Kato–Temple (a sink head's smallest σ lie within 1e-4 of each other), the
    # first-order σ_n ≥ (θ_1 + r_1)^(−1/2): too wide to report, narrow enough to spare a head its SVD when
    # only a layer's maximum is wanted (condcli.analysis.headmax)
    lower = torch.maximum(temple, below(ritz.values[:, 0] + ritz.residuals[:, 0]))
    ok = torch.isfinite(lower) & (lower > 0)
    return torch.where(ok, lower, zero), torch.where(torch.isfinite(upper), upper, inf)


def sketch_sigma_n(x: torch.Tensor, fro2: torch.Tensor, solver: _Solver, seed: int = 0) -> torch.Tensor:
    """A lower bound on σ_n of matrices (B, n, n) with ‖x‖_F² ``fro2`` that ``solver`` solves with, from one
    solve with :data:`SKETCH_COLUMNS` Gaussian right-hand sides G (``seed``), which holds but for a chance of
    :data:`BOUND_RISK` over G (0 where none). With A = P⁻¹ and σ_1(A) = 1/σ_n along the unit vectors u, v:
    ‖AG‖₂ ≥ ‖uᵀAG‖ = σ_1(A)·‖vᵀG‖, and ‖vᵀG‖² is χ² with m = SKETCH_COLUMNS degrees of freedom, below t with
    a chance of at most (t/2)^{m/2}/Γ(m/2 + 1) (e^{−x} ≤ 1 under the integral); t is chosen where that is
    BOUND_RISK. The solve's own error enters through its residual R = PŜ − G, computed, and bounded with
    its rounding (γ_n|P||Ŝ|, Higham Thm 3.5): AG = Ŝ − AR, so ‖A‖(√t − ‖R‖₂) ≤ ‖Ŝ‖₂, whatever algorithm
    solved. ‖Ŝ‖₂ comes from the m × m Gram ŜᵀŜ, with its rounding. One blocked solve and one product cost
    about eight triangular solves at 2,048 tokens: a tenth of σ_n's Lanczos. Within 10× to 60× of σ_n on
    a causal P, from its few largest singular values of P⁻¹ and its Frobenius norm: enough to show that a
    head a thousand times above the capture's floor cannot set a layer's maximum (docs/performance.md)."""
    batch, n, _ = x.shape
    m = min(SKETCH_COLUMNS, n)
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(n, m, generator=gen, dtype=x.dtype).to(x.device).expand(batch, n, m)
    s = solver.solve(g)
    gamma = n * _U / (1 - n * _U)
    fro_s = torch.linalg.vector_norm(s, dim=(-2, -1))
    r = torch.linalg.vector_norm(x @ s - g, dim=(-2, -1)) * (1 + 2 * _U) + gamma * fro2.sqrt() * fro_s
    gram = s.mT @ s
    finite = torch.isfinite(gram).all((-2, -1)) & torch.isfinite(r)  # solves that overflow bound nothing
    gram = torch.where(finite[:, None, None], gram, 0.0)
    # the Gram's rounding (γ_n per entry of |Ŝ|ᵀ|Ŝ|, at most ‖Ŝ‖_F² in 2-norm) and eigvalsh's backward error
    top = torch.linalg.eigvalsh(gram)[..., -1] + (gamma + 8 * m * _U) * fro_s.square()
    half = m / 2
    root_t = math.sqrt(2 * math.exp((math.log(BOUND_RISK) + math.lgamma(half + 1)) / half))
    norm_inv = top.clamp_min(0).sqrt() / (root_t - r)  # ≥ ‖P⁻¹‖₂ where √t > ‖R‖₂
    lower = (1 - 1e-9) / norm_inv
    ok = finite & torch.isfinite(lower) & (root_t > r) & (lower > 0)
    return torch.where(ok, lower, torch.zeros_like(lower))


def quick_sigma_n(x: torch.Tensor, fro2: torch.Tensor, *, lower: bool | None = None) -> torch.Tensor:
    """A lower bound on σ_n of matrices (B, n, n) as :func:`brackets` takes them (``lower``: as there), from
    :data:`QUICK_STEPS` Lanczos steps on (PPᵀ)⁻¹ and no convergence, which holds but for a chance of
    :data:`BOUND_RISK` over the start vector (0 where none): Kuczyński–Woźniakowski bound the chance that k
    steps from a random start leave θ_1 below (1 − ε)λ_1 by 1.648·√n·e^{−√ε(2k−1)}; ε is chosen where that
    is BOUND_RISK, and σ_n ≥ (θ_1/(1 − ε))^{−1/2}, less the solves' backward error. After 24 steps at
    n = 2,048, 1 − ε = 0.54: within 1.4× of σ_n where θ_1 has converged, where :func:`sketch_sigma_n` may be
    60× off (a sink head, whose smallest σ cluster). Narrower than the sketch, and a third of the full
    brackets' σ_n steps."""
    batch, n, _ = x.shape
    solver = _Solver.of(x, fro2, lower)
    zero = torch.zeros(batch, dtype=x.dtype, device=x.device)
    ritz = _inverse_ritz(x, solver, QUICK_STEPS, (0.0, 0.0))  # every step, or an invariant subspace
    # √ε for the steps taken (fewer than QUICK_STEPS where one matrix of the stack reached an invariant
    # subspace: the chance is then taken for that many, which holds for every matrix)
    root = math.log(1.648 * math.sqrt(n) / BOUND_RISK) / (2 * ritz.steps - 1)
    if root >= 1 or not bool(torch.isfinite(ritz.values).all()):  # too few steps at that chance, or overflow
        return zero
    theta = ritz.values[:, 0] / (1 - root**2)  # λ_1 ≤ θ_1/(1 − ε) but for a chance of BOUND_RISK
    bound = (1 - 1e-6) * theta.clamp_min(torch.finfo(x.dtype).tiny).rsqrt() - 2 * solver.margin
    ok = torch.isfinite(bound) & (bound > 0) & (ritz.values[:, 0] > 0)
    return torch.where(ok, bound, zero)


@dataclass(frozen=True)
class Decided:
    """Per matrix (...,): what the SVD path would report, where :attr:`ok` (the module docstring)."""

    ok: torch.Tensor  # bool: decided here; elsewhere the other fields are meaningless
    below: torch.Tensor  # bool: a floor (σ_n ≤ tol proven)
    reported: torch.Tensor  # the measured κ, or the floor σ_1/tol
    sigma: torch.Tensor  # (..., 2): σ_1 and σ_n (for a floor, σ_n's upper bound)
    tolerance: torch.Tensor  # tol = max(u·‖P‖_F, n·eps64·σ_1), as the SVD path computes it


def decide(terms: torch.Tensor, n: int, capture_dtype: torch.dtype | str) -> Decided:
    """:class:`Decided` from :func:`brackets` of n × n matrices captured in ``capture_dtype``."""
    fro2, s1_lo, s1_hi, sn_lo, sn_hi = terms.unbind(-1)
    u = machine_eps(capture_dtype) / 2
    bounds = _tolerance(fro2, s1_hi, n, u)
    resolved = _resolved(sn_lo, bounds)
    floor = _floored(sn_hi, bounds) & ~resolved
    s1 = (s1_lo + s1_hi) / 2
    sn = torch.where(resolved, (sn_lo + sn_hi) / 2, sn_hi)
    tol = torch.maximum(u * fro2.sqrt(), n * EPS64 * s1)
    kappa = s1 / sn
    allowed = (4 * n * EPS64 * kappa).clamp_min(RTOL)
    kappa_width = (s1_hi / sn_lo.clamp_min(torch.finfo(sn_lo.dtype).tiny)) / (s1_lo / sn_hi) - 1
    measured = resolved & (kappa_width <= 2 * allowed)
    floored = floor & (s1_hi / s1_lo - 1 <= 2 * RTOL)
    reported = torch.where(floor, floor_kappa(s1, tol), kappa)
    return Decided(measured | floored, floor, reported, torch.stack([s1, sn], -1), tol)


def _brackets_where_eligible(
    x: torch.Tensor, capture_dtype: torch.dtype | str, inverse_steps: int = INVERSE_STEPS
) -> torch.Tensor:
    """:func:`brackets` of the matrices of ``x`` that are finite and non-negative, NaN for the others (they go
    to the SVD): with :func:`applies`, those are the :func:`eligible` ones."""
    ok = finite_non_negative(x)
    if bool(ok.all()):
        return brackets(x, capture_dtype, inverse_steps)
    out = torch.full((*x.shape[:-2], 5), torch.nan, dtype=x.dtype, device=x.device)
    if bool(ok.any()):
        out[ok] = brackets(x[ok], capture_dtype, inverse_steps)
    return out


def _decided(f: torch.Tensor, capture_dtype: torch.dtype | str) -> Decided:
    """:func:`decide` over the stack ``f`` (float64), each matrix the first steps leave undecided tried once
    more with :data:`RETRY_STEPS` where n ≥ :data:`RETRY_TOKENS`."""
    n = int(f.shape[-1])
    decided = decide(run_grouped(lambda m: _brackets_where_eligible(m, capture_dtype), f), n, capture_dtype)
    retry = ~decided.ok & finite_non_negative(f)
    if n < RETRY_TOKENS or not bool(retry.any()):
        return decided
    again = decide(
        run_grouped(lambda m: _brackets_where_eligible(m, capture_dtype, RETRY_STEPS), f[retry]),
        n,
        capture_dtype,
    )
    merged = {}
    for field in dataclasses.fields(Decided):
        merged[field.name] = getattr(decided, field.name).clone()
        merged[field.name][retry] = getattr(again, field.name)
    return Decided(**merged)


def finite_non_negative(x: torch.Tensor) -> torch.Tensor:
    """(...,) bool: every entry finite and ≥ 0 (NaN propagates through amin and amax)."""
    flat = x.flatten(-2)
    return flat.amin(-1).ge(0) & torch.isfinite(flat.amax(-1))


def summarize_causal(x: torch.Tensor, capture_dtype: torch.dtype | str) -> SpectrumSummary:
    """:func:`~condcli.spectra.core.summarize` (floors, no exact spectrum of a floor) of a stack that
    :func:`applies`, with every matrix decided here kept and the rest from the SVD path. The summary's
    ``sigma`` holds (σ_1, σ_n) per matrix only (σ_n's upper bound for a floor decided here), its
    ``numerical_rank`` is n for a measurement and, for a floor decided here, n − 1 (an upper bound: σ_n ≤
    tol): the callers that take this path use κ, the flag and σ_n alone."""
    f, scale = upcast(x)  # float32/16 captures (and probabilities) are in the safe band: no rescale
    n = int(f.shape[-1])
    decided = _decided(f, capture_dtype)
    ok = decided.ok & finite_non_negative(x) & (scale is None)
    sigma, tol, below = decided.sigma, decided.tolerance, decided.below
    rank = torch.where(below, n - 1, n).to(torch.int64)
    kappa = decided.reported  # for a floor, the floor itself (as a Gram-decided floor's)
    redo = ~ok
    if bool(redo.any()):
        s = summarize(x[redo], capture_dtype, method="svd", floors=True, exact_spectrum=False)
        sigma = sigma.clone()
        sigma[redo] = s.sigma[..., [0, -1]].to(sigma.dtype)
        tol, below, kappa, rank = tol.clone(), below.clone(), kappa.clone(), rank.clone()
        tol[redo], below[redo], kappa[redo], rank[redo] = (
            s.tolerance,
            s.below_precision,
            s.kappa,
            s.numerical_rank,
        )
    tally(int(ok.sum()), int(redo.sum()))
    name = capture_dtype if isinstance(capture_dtype, str) else str(capture_dtype).removeprefix("torch.")
    return SpectrumSummary(
        sigma=sigma,
        kappa=kappa,
        numerical_rank=rank,
        below_precision=below,
        tolerance=tol,
        capture_dtype=name,
    )


def decided_summary(
    terms: torch.Tensor, n: int, capture_dtype: torch.dtype | str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """What :func:`summarize_causal` reports for one n × n matrix from its :func:`brackets` ``terms`` (5,),
    computed as it computes them (one matrix, on one thread): (reported κ, floor flag, relative uncertainty),
    each 0-d, or None where the brackets do not decide it (its summary then needs the retry or the SVD).
    Counted in :func:`counts` where decided."""
    got = decide(terms[None], n, capture_dtype)
    if not bool(got.ok[0]):
        return None
    tally(1, 0)
    below = got.below[0]
    return got.reported[0], below, rel_of(got.sigma[0, -1], got.tolerance[0], below)
