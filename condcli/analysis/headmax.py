"""A layer's largest κ(P) and μ(A) over its heads, per sample, decomposing only the heads that decide them.

Without ``--heads`` a layer reports, per sample, the largest κ(P) and μ(A) over its groups and heads and
whether any head is a floor (docs/math.md#layers). Every head gets proven bounds first
(:mod:`condcli.spectra.certify`, cheaper than its SVD); a head whose bound proves it is no floor and cannot
exceed a maximum already measured needs no SVD. A causal head's σ_n bound comes from a sketch, narrowed
where it leaves the head above the largest proven lower bound on its layer's heads (:func:`_sharpened`;
each holds but for a chance of 1e-12 over random vectors, docs/math.md). The heads decomposed are the
unproven ones and, round by round, the one with the highest bound on κ and the one with the highest bound
on μ that could still beat the maxima so far. Each is decomposed exactly as
:func:`condcli.analysis.persample.summarize_heads` does, so the maxima and the floor flags are those of
decomposing every head (bitwise, with one decomposition per call: the CPU default), and which heads are
decomposed depends on the sample alone (docs/math.md#aggregation).

Where it runs (:data:`DEFAULTS`, per device kind of the captured P; :func:`forced` overrides it): on the CPU
for causal attention (P lower triangular, a floor proven by triangular solves in O(n²)) from
:data:`MIN_TOKENS` tokens on, off for other attention on the CPU (the proof costs nearly the SVDs it spares),
and on for CUDA. The figures behind these defaults: docs/performance.md#pruned-maxima-over-heads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch

from condcli.analysis.persample import head_chunks, summarize_samples
from condcli.spectra import causal, certify, mu_softmax_attention, strategies
from condcli.spectra._tensor import check_finite
from condcli.spectra.certify import bound_terms, kappa_bounds
from condcli.spectra.core import IN_BAND, Method, upcast
from condcli.spectra.uncertainty import product_rel

# Where a layer's maxima over heads are pruned, per device kind of the captured P: "always", "causal" (only
# for causal attention, whose P is lower triangular, on at least MIN_TOKENS tokens) or "never" (the module
# docstring says why)
DEFAULTS: dict[str, str] = {"cpu": "causal", "cuda": "always"}
MIN_TOKENS = 384  # "causal" on the CPU: measured even at 256 tokens, 10% faster at 512, 3× at 2,048
_forced: list[bool] = []  # innermost `forced` last


def enabled(device: torch.device, *, causal: bool, tokens: int) -> bool:
    """Whether :func:`head_maxima` runs for a layer's P on ``device`` (``causal``: the layer's attention is
    causal; ``tokens``: its longest sample): the innermost :func:`forced`, else :data:`DEFAULTS` ("never"
    for a kind with none)."""
    if _forced:
        return _forced[-1]
    policy = DEFAULTS.get(device.type, "never")
    return policy == "always" or (policy == "causal" and causal and tokens >= MIN_TOKENS)


@contextmanager
def forced(on: bool) -> Iterator[None]:
    """Prune (or not) on every device inside (tests and benches compare both ways)."""
    _forced.append(on)
    try:
        yield
    finally:
        _forced.pop()


@dataclass(frozen=True)
class HeadMaxima:
    """Per sample (S,): the largest reported κ(P) and μ(A) over groups and heads, and any floor among them."""

    kappa: torch.Tensor  # (S,) float64
    floor: torch.Tensor  # (S,) bool
    mu: torch.Tensor  # (S,) float64: max of μ(A) = κ(P)·κ(A_l)·κ(W_V) (mu_softmax_attention)
    kappa_rel: torch.Tensor  # (S,) relative uncertainty of the head that attains ``kappa`` (uncertainty.py)
    mu_rel: torch.Tensor  # (S,) relative uncertainty of the head that attains ``mu``
    decomposed: int  # heads given an SVD (or Gram path), of S·G·H


def head_maxima(
    mats: Sequence[torch.Tensor],
    capture_dtype: torch.dtype,
    method: Method,
    kappa_attn: torch.Tensor,
    kappa_wv: torch.Tensor,
    attn_rel: torch.Tensor | None = None,
) -> HeadMaxima | None:
    """Maxima over heads of one layer's P, per sample: ``mats`` per sample (G, H, n, n); ``kappa_attn`` (S, G)
    the reported κ(A_l) and ``attn_rel`` its relative uncertainty (default 0); ``kappa_wv`` (H,) per query
    head. None where the bounds do not apply (P not square):
    the caller decomposes every head."""
    if not mats or any(m.shape[-1] != m.shape[-2] for m in mats):
        return None
    terms, brackets = _bounds(mats, capture_dtype)
    wv = kappa_wv.to(torch.float64)
    terms = _sharpened(mats, capture_dtype, terms, kappa_attn, wv)
    bounds = [kappa_bounds(t, int(m.shape[-1]), capture_dtype) for t, m in zip(terms, mats, strict=True)]
    hi = [b.kappa_hi for b in bounds]  # (G, H): reported ≤ hi, inf where unproven
    proven_floor = [b.floor for b in bounds]
    hiw = [mu_softmax_attention(h, kappa_attn[s][:, None], wv) for s, h in enumerate(hi)]
    rep = [torch.full_like(h, torch.nan) for h in hi]  # reported κ of the heads decomposed so far
    below = [torch.zeros(h.shape, dtype=torch.bool) for h in hi]
    rel = [torch.full_like(h, torch.inf) for h in hi]  # relative uncertainty of the heads decomposed
    done = [torch.zeros(h.shape, dtype=torch.bool) for h in hi]
    # first round: every unproven head (its value and flag are unknown) and the highest bounds on κ and μ
    none = torch.tensor(-torch.inf, dtype=torch.float64)
    todo = [
        set(torch.nonzero(~torch.isfinite(h).flatten()).flatten().tolist()) | _next(d, ((h, none), (w, none)))
        for h, w, d in zip(hi, hiw, done, strict=True)
    ]
    while any(todo):
        _decompose(mats, capture_dtype, method, todo, (rep, below, rel), done, brackets)
        todo = []
        for s in range(len(mats)):
            mu = _mu(rep[s], done[s], kappa_attn[s], wv)
            todo.append(_next(done[s], ((hi[s], _max(rep[s], done[s])), (hiw[s], _max(mu, done[s])))))
    kappa = torch.stack([_max(r, d) for r, d in zip(rep, done, strict=True)])
    mus = [_mu(r, d, kappa_attn[s], wv) for s, (r, d) in enumerate(zip(rep, done, strict=True))]
    a_rel = torch.zeros_like(kappa_attn) if attn_rel is None else attn_rel
    mu_rels = [product_rel(r, a_rel[s][:, None]) for s, r in enumerate(rel)]
    return HeadMaxima(
        kappa=kappa,
        kappa_rel=torch.stack([_rel_at_max(r, d, u) for r, d, u in zip(rep, done, rel, strict=True)]),
        mu_rel=torch.stack([_rel_at_max(m, d, u) for m, d, u in zip(mus, done, mu_rels, strict=True)]),
        floor=torch.stack(
            [((b & d) | (f & ~d)).any() for b, d, f in zip(below, done, proven_floor, strict=True)]
        ),
        mu=torch.stack([_max(m, d) for m, d in zip(mus, done, strict=True)]),
        decomposed=sum(int(d.sum()) for d in done),
    )


def _bounds(
    mats: Sequence[torch.Tensor], capture_dtype: torch.dtype
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per sample (G, H, 5): each head's :func:`~condcli.spectra.certify.bound_terms` (a few heads at a
    time, as summarize_heads): on the CPU thread pool where that strategy is in force (a CUDA stack copied
    to the host, as it does for decompositions), else one batched call per sample on its device. Which
    heads are proven may differ in the last digits of a bound with the split, never what is reported:
    every reported number comes from a decomposition. Second, per sample (G, H, 5): a head's Lanczos
    brackets where they were computed one head per task on the thread pool, as its decomposition computes
    them (:func:`_decompose` reuses them), NaN elsewhere."""
    parts: list[list[torch.Tensor]] = [[] for _ in mats]
    kept: list[list[torch.Tensor]] = [[] for _ in mats]
    scratch: dict[int, torch.Tensor] = {}

    def terms(m: torch.Tensor) -> torch.Tensor:  # κ and the verdicts are scale-invariant: a rescale is moot
        brackets: list[torch.Tensor] = []
        # kept only from a capture the upcast never rescales, as the decomposition's own (summarize_causal
        # sends a rescaled stack to the SVD)
        keep = brackets if m.dtype in IN_BAND else None
        source = m if _on_host_in_band(m) else None
        bound = bound_terms(_float64(m, scratch), capture_dtype, keep, source)
        made = brackets[0] if brackets else torch.full((*bound.shape[:-1], 5), torch.nan, dtype=bound.dtype)
        return torch.cat([bound, made.to(bound.device)], -1)

    for chunk in head_chunks(mats):
        if strategies.strategy_for(chunk[0].device) is strategies.THREADS:
            # one task per sample, or per part of its heads where there are fewer samples than threads (a
            # single long prompt): every thread busy either way; from causal.MIN_TOKENS on, one task per
            # head, since a stack's Lanczos steps run until its slowest matrix converges
            heads = int(chunk[0].shape[1])
            long = int(chunk[0].shape[-1]) >= causal.MIN_TOKENS
            split = heads if long else max(1, -(-torch.get_num_threads() // len(chunk)))
            pieces = [list(m.cpu().tensor_split(split, dim=1)) for m in chunk]
            flat = [p for sample in pieces for p in sample if p.shape[1] > 0]
            done = iter(strategies.thread_map(terms, flat))
            got = [torch.cat([next(done) for p in sample if p.shape[1] > 0], dim=1) for sample in pieces]
            if not long:  # a task of several heads: its Lanczos steps are not those of one head alone
                got = _without_brackets(got)
        else:  # batched kernels over the sample's heads on its device: not one head's brackets either
            got = [terms(m) for m in chunk]
            got = _without_brackets(got)
        for s, t in enumerate(got):
            parts[s].append(t[..., :5].cpu())
            kept[s].append(t[..., 5:].cpu())
    return [torch.cat(p, dim=1) for p in parts], [torch.cat(k, dim=1) for k in kept]


def _without_brackets(got: list[torch.Tensor]) -> list[torch.Tensor]:
    """Bound tasks' outputs (..., 5 + 5) with their brackets made NaN: not one head's, so not reused."""
    return [torch.cat([g[..., :5], torch.full_like(g[..., 5:], torch.nan)], -1) for g in got]


def _sharpened(
    mats: Sequence[torch.Tensor],
    capture_dtype: torch.dtype,
    terms: list[torch.Tensor],
    kappa_attn: torch.Tensor,
    wv: torch.Tensor,
) -> list[torch.Tensor]:
    """``terms`` with :func:`~condcli.spectra.certify.sharpened` bounds for the heads that need them: those
    whose bound on κ (or μ) lies above the largest proven lower bound on a head's κ (or μ) of their sample,
    which the layer's maximum reaches whatever the SVDs say; a head below it can set neither maximum. One
    head per task on the thread pool where that strategy is in force, else one head after the other."""
    picked: list[tuple[int, int]] = []
    for s, t in enumerate(terms):
        if int(mats[s].shape[-1]) < causal.MIN_TOKENS:  # no Lanczos path: nothing to sharpen
            continue
        b = kappa_bounds(t, int(mats[s].shape[-1]), capture_dtype)
        mu_hi = mu_softmax_attention(b.kappa_hi, kappa_attn[s][:, None], wv)
        mu_lo = mu_softmax_attention(b.kappa_lo.clamp_min(1), kappa_attn[s][:, None], wv)  # κ ≥ 1
        need = ~b.floor & ((b.kappa_hi > b.kappa_lo.amax()) | (mu_hi > mu_lo.amax()))
        picked += [(s, int(i)) for i in torch.nonzero(need.flatten()).flatten().tolist()]
    if not picked:
        return terms
    scratch: dict[int, torch.Tensor] = {}

    def sharpen(si: tuple[int, int]) -> torch.Tensor:
        s, i = si
        m = mats[s].flatten(0, -3)[i]
        own = terms[s].flatten(0, -2)[i][None]
        return certify.sharpened(_float64(m, scratch)[None], capture_dtype, own)[0]

    device = mats[0].device
    if strategies.strategy_for(device) is strategies.THREADS:
        got = strategies.concurrently([partial(sharpen, si) for si in picked])
    else:
        got = [sharpen(si) for si in picked]
    out = [t.clone() for t in terms]
    for (s, i), g in zip(picked, got, strict=True):
        out[s].view(-1, out[s].shape[-1])[i] = g.to(out[s].dtype).cpu()
    return out


def _on_host_in_band(m: torch.Tensor) -> bool:
    """A CPU capture that :func:`_float64` copies into its buffer as it is (no rescale), and that the bounds
    may read in its place."""
    return m.device.type == "cpu" and m.dtype in IN_BAND


def _float64(m: torch.Tensor, scratch: dict[int, torch.Tensor]) -> torch.Tensor:
    """``m`` as float64 (:func:`~condcli.spectra.core.upcast`), on the CPU into a buffer per thread in
    ``scratch`` (one :func:`_bounds` or :func:`_sharpened` call's, freed with it), reused while the shape
    holds: a fresh float64 copy of a 2,048-token head is 32 MiB of pages the kernel maps and zeroes, 6× the
    copy's own time. Only the bounds read it, and they keep no reference to it."""
    if not _on_host_in_band(m):
        return upcast(m)[0]
    check_finite(m)
    key = threading.get_ident()
    buf = scratch.get(key)
    if buf is None or buf.shape != m.shape:
        buf = scratch[key] = torch.empty(m.shape, dtype=torch.float64)
    return buf.copy_(m)


def _decompose(
    mats: Sequence[torch.Tensor],
    capture_dtype: torch.dtype,
    method: Method,
    todo: list[set[int]],
    found: tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]],
    done: list[torch.Tensor],
    brackets: list[torch.Tensor] | None = None,
) -> None:
    """Decompose the heads ``todo`` (flat (G, H) indices per sample), all samples in one call, as
    summarize_heads does (one matrix per decomposition on the CPU), and record their reported κ, flag and
    relative uncertainty in ``found``. A head whose Lanczos brackets the bounds kept (``brackets``, per
    sample (G, H, 5), NaN where none), computed as its decomposition computes them, is decided from them
    where they decide it (:func:`condcli.spectra.causal.decided_summary`): the same numbers, bitwise, without
    computing them twice; the others are decomposed."""
    rep, below, rel = found
    picked = [(s, i) for s, idx in enumerate(todo) for i in sorted(idx)]
    if not picked:
        return
    rest = []
    for s, i in picked:
        terms = None if brackets is None else brackets[s].flatten(0, -2)[i]
        known = None
        if terms is not None and bool(torch.isfinite(terms).all()):
            known = causal.decided_summary(terms, int(mats[s].shape[-1]), capture_dtype)
        if known is None:
            rest.append((s, i))
            continue
        rep[s].view(-1)[i], below[s].view(-1)[i], rel[s].view(-1)[i] = known
        done[s].view(-1)[i] = True
    if not rest:
        return
    one = [mats[s].flatten(0, -3)[i] for s, i in rest]
    got = summarize_samples(one, capture_dtype, method, exact_spectrum=False)
    for j, (s, i) in enumerate(rest):
        rep[s].view(-1)[i] = got.reported[j]
        below[s].view(-1)[i] = got.below[j]
        rel[s].view(-1)[i] = got.uncertainty[j]
        done[s].view(-1)[i] = True


def _mu(rep: torch.Tensor, done: torch.Tensor, kappa_attn: torch.Tensor, wv: torch.Tensor) -> torch.Tensor:
    """μ(A) of the heads decomposed (NaN elsewhere), by the formula the full path uses."""
    mu = mu_softmax_attention(torch.where(done, rep, torch.ones_like(rep)), kappa_attn[:, None], wv)
    return torch.where(done, mu, torch.full_like(mu, torch.nan))


def _max(values: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """The largest of ``values`` where ``done`` (−inf where none)."""
    return torch.where(done, values, torch.full_like(values, -torch.inf)).amax()


def _rel_at_max(values: torch.Tensor, done: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
    """The relative uncertainty of the decomposed head with the largest value (as the full path's max_rel)."""
    masked = torch.where(done, values, torch.full_like(values, -torch.inf)).flatten()
    return rel.flatten()[masked.argmax()]


def _next(done: torch.Tensor, targets: tuple[tuple[torch.Tensor, torch.Tensor], ...]) -> set[int]:
    """For each (bounds, maximum so far): the undecomposed head with the highest bound above that maximum."""
    picks: set[int] = set()
    for bound, best in targets:
        open_ = ~done & (bound > best)
        if bool(open_.any()):
            picks.add(int(torch.where(open_, bound, torch.full_like(bound, -torch.inf)).flatten().argmax()))
    return picks
