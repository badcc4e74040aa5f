"""Normalised attention entropy (the entropy-collapse signal of Zhai et al. 2023), float64, batched."""

from __future__ import annotations

import numpy as np
import torch

from condcli.errors import InputError
from condcli.spectra._tensor import Tensorish, as_float64, validated


def attention_support(q: int, k: int, *, causal: bool = False, window: int | None = None) -> torch.Tensor:
    """(q,) float64: how many of k keys each of q queries may attend to (the last q of k positions).

    Full attention: k. Causal: position + 1. A local window: causal, the last ``window`` keys up to the
    query's own (HF ``sliding_window``); otherwise the keys within ±``window`` of it (ModernBERT's local
    layers).
    """
    if window is not None and not window >= 1:
        raise InputError(f"window must be at least 1 key, got {window}", "e.g. window=128, or None for none")
    pos = torch.arange(q, dtype=torch.float64) + (k - q)
    if causal:
        support = pos + 1
        return support if window is None else torch.clamp(support, max=window)
    if window is None:
        return torch.full((q,), float(k), dtype=torch.float64)
    return torch.clamp(pos, max=window) + torch.clamp(k - 1 - pos, max=window) + 1


def attention_entropy(P: Tensorish, *, causal: bool = False, window: int | None = None) -> torch.Tensor:
    """(..., q, k) attention probabilities → (...,): the mean over queries of −Σ_j p_j log p_j / log s.

    s is the number of keys the query may attend to, from the mask's structure (:func:`attention_support`;
    never from P's zeros, which a collapsed softmax also produces). 1 means uniform over those keys, 0 all
    weight on one. A query that may attend to one key only has no entropy to lose (0/0) and is left out; a
    matrix with no other query (a one-token sample) is 1 by that convention.
    """
    p = validated(P).detach()  # checked for NaN/Inf there; upcast a matrix at a time below
    if bool(p.amin() < 0):  # one reduction, no mask the size of P
        raise InputError("P holds negative entries: attention probabilities are ≥ 0", "pass softmax output")
    q, k = p.shape[-2:]
    h = _row_entropy(p, causal)  # (..., q)
    support = attention_support(q, k, causal=causal, window=window).to(p.device)
    valid = support > 1
    if not bool(valid.any()):
        return torch.ones(p.shape[:-2], dtype=torch.float64, device=p.device)
    return (h[..., valid] / torch.log(support[valid])).mean(-1)


ROWS = 256  # rows of a matrix whose p·log p are taken at once (:func:`_row_entropy`)


def _row_entropy(p: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """(..., q, k) → (..., q): −Σ_j p_j log p_j of each row in float64, :data:`ROWS` rows at a time through
    one float64 buffer (a float64 copy of every matrix at once, and a second for the logs, cost more in fresh
    pages than in arithmetic at 2,048 tokens); bitwise :func:`_plogp` summed over each row. ``causal``: the
    keys past those a block's last query may see (the last q of k positions) are skipped where they are all
    exactly zero, as a causal mask leaves them: half the logs of a causal P, and the same sums (a zero's
    term is +0, and the terms before it are summed in the same lanes: the width kept is a multiple of
    :data:`ROWS`)."""
    if p.device.type != "cpu":  # one batched op on an accelerator: a loop of small ones is launch-bound there
        return _row_entropy_batched(p)
    q, k = p.shape[-2:]
    flat = p.reshape(-1, q, k)
    out = torch.empty(flat.shape[0], q, dtype=torch.float64, device=p.device)
    buf = torch.empty(min(q, ROWS), k, dtype=torch.float64, device=p.device)
    for i, m in enumerate(flat):
        for r0 in range(0, q, ROWS):
            rows = m[r0 : r0 + ROWS]
            # keys the block's last query may see, if causal, rounded up to a whole block of ROWS: torch sums
            # a row in vector lanes, and a width the lanes divide alike sums the kept terms as the whole row
            reach = min(k, -(-(r0 + len(rows) + k - q) // ROWS) * ROWS)
            if causal and reach < k and not bool(rows[:, reach:].any()):
                rows = rows[:, :reach]
            b = _plogp(rows, buf[: rows.shape[0], : rows.shape[1]])
            torch.sum(b, -1, out=out[i, r0 : r0 + rows.shape[0]])
    return out.neg_().reshape(p.shape[:-1])


def _row_entropy_batched(p: torch.Tensor) -> torch.Tensor:
    """:func:`_row_entropy` as one batched op over a float64 copy of every matrix (an accelerator's path)."""
    return _plogp(p.to(torch.float64)).sum(-1).neg_()


def _plogp(p: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """p·log p elementwise in float64 (into ``out``, a float64 buffer of p's shape, where given), 0 where
    p = 0, for p ≥ 0 finite: log and product in one buffer, and log 1 = 0 taken where p = 0, since log 0 =
    −inf is the vectorised log's slow path (a causal P is half zeros: its 2,048 × 2,048 heads took 2.3× as
    long); 2.8× faster than ``torch.special.xlogy(p, p)`` on ViT-B's P. The same float64 value as xlogy
    within an ulp of the log (PyTorch's vectorised log against xlogy's), and bitwise that of log(p)·p with
    0·log 0 taken as 0."""
    out = torch.empty(p.shape, dtype=torch.float64, device=p.device) if out is None else out
    out.copy_(p)  # exact
    out.masked_fill_(p == 0, 1.0)
    out.log_()
    return out.mul_(p)  # an overflow (p near 1e308) stays inf


SINK_SKIP = 4  # causal attention: the first queries see at most this many keys, so their mass on key 0 is
# forced (query 0 sees key 0 alone); the sink score counts the queries after them
COLLAPSED_HEAD = 0.1  # a head whose normalised entropy H(P) is below this has collapsed (near one key)
SINK_HEAD = 0.9  # a head whose sink score is at least this is a sink head (docs/math.md#layers)


def sink_score(P: Tensorish, *, causal: bool = False) -> torch.Tensor:
    """(..., q, k) attention probabilities → (...,): the mean over queries of P[i, 0], the mass on the first
    key (the attention sink of StreamingLLM, Xiao et al. 2023). Causal: queries :data:`SINK_SKIP` … q−1
    only (all but the last where q ≤ SINK_SKIP, and the one query of a one-token sample)."""
    t = torch.from_numpy(np.asarray(P)) if not isinstance(P, torch.Tensor) else P
    q = int(t.shape[-2])
    start = 0 if not causal else min(SINK_SKIP, max(q - 1, 0))
    # the first key's column alone is upcast (and checked): a float64 copy of all of P is not needed
    return as_float64(t[..., start:, :1], min_ndim=2)[..., 0].mean(-1)
