"""How a tensor an attention consumed is told equal to the one the generic path infers (float64).

Up to one positive scale (a scale folded into q), within ``tolerance`` of the capture dtype: in the module's
own order, as a set of rows (tokens regrouped inside the call), as a subset of rows (queries of some
tokens), by row directions or norms (q and k normalised or rotated row by row), and P recomputed from q and
k (:func:`probs_match`). Used by :mod:`condcli.adapters.generic.verify`.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


def tolerance(dtype: torch.dtype) -> float:
    """Relative residual allowed between an inferred and an observed tensor computed in ``dtype``."""
    return float(torch.finfo(dtype).eps) ** 0.5 if dtype.is_floating_point else 1e-6


def fit(observed: Tensor, inferred: Tensor, tol: float) -> bool:
    """observed ≈ s·inferred for one s > 0 (float64), relative residual ≤ tol."""
    o, x = observed.reshape(-1).to(torch.float64), inferred.reshape(-1).to(torch.float64)
    xx = float(x @ x)
    on = float(o.norm())
    if xx == 0.0 or on == 0.0 or not torch.isfinite(o).all():
        return False
    s = float(o @ x) / xx
    return s > 0 and float((o - s * x).norm()) <= tol * on


def _rows(t: Tensor) -> Tensor:
    """(..., d_h) → its rows as an order-free signature: the sorted values of the rows projected on a few
    fixed random directions, (directions, rows). Sorting a projection is 1-Lipschitz, so rounding moves the
    signature no more than the rows (two rows of nearly equal projection may swap places without changing
    it); a multiset of rows is told apart from another by its projections on a few directions."""
    m = t.reshape(-1, t.shape[-1]).to(torch.float64)
    g = torch.Generator().manual_seed(0)
    directions = torch.randn(m.shape[-1], 8, generator=g, dtype=torch.float64).to(m.device)
    signature: Tensor = (m @ directions).T.sort(-1).values
    return signature


def unit(t: Tensor) -> Tensor:
    """Each row (last axis) scaled to unit norm, float64 (zero rows stay zero)."""
    t = t.to(torch.float64)
    u: Tensor = t / t.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    return u


def matches(observed: Tensor, inferred: Tensor, tol: float, per_row: bool = False) -> str | None:
    """How ``observed`` (the module's tensor, (..., n, d_h)) equals ``inferred`` (B, G, H, n, d_h): "exactly"
    (same order), "as rows" (the same rows in another order); with ``per_row`` (q and k, which a model
    may normalise or rotate row by row) "by row directions" or "by row norms"; None where it does not."""
    if observed.shape[-1] != inferred.shape[-1] or observed.numel() != inferred.numel():
        return None
    if not per_row:
        if observed.shape[-2] == inferred.shape[-2] and fit(observed.reshape(inferred.shape), inferred, tol):
            return "exactly"
        if fit(_rows(observed), _rows(inferred), tol):
            return "as rows"
        return None
    if observed.shape[-2] == inferred.shape[-2]:  # rows normalised (cosine attention: Swin V2, q/k norms)
        if fit(unit(observed.reshape(inferred.shape)), unit(inferred), tol):
            return "by row directions"
    # row norms, in the module's own order only, and only where they say something: rows of nearly equal
    # norm (q/k norms, LayerNorm'd heads) would match any other such rows
    if observed.shape[-2] != inferred.shape[-2]:
        return None
    on = observed.reshape(inferred.shape).to(torch.float64).norm(dim=-1)
    xn = inferred.to(torch.float64).norm(dim=-1)
    spread = float(xn.std() / xn.mean()) if xn.numel() > 1 and float(xn.mean()) > 0 else 0.0
    return "by row norms" if spread >= 10 * tol and fit(on, xn, tol) else None


def subset(observed: Tensor, inferred: Tensor, tol: float) -> str | None:
    """Says "as a subset of rows" where every row of ``observed`` is a row of ``inferred`` (one positive scale
    for all): the queries of a class token, or of tokens subsampled from A_l's."""
    if observed.shape[-1] != inferred.shape[-1] or observed.numel() >= inferred.numel():
        return None
    o = observed.reshape(-1, observed.shape[-1]).to(torch.float64)
    x = inferred.reshape(-1, inferred.shape[-1]).to(torch.float64)
    g = torch.Generator().manual_seed(1)
    r = torch.randn(x.shape[-1], generator=g, dtype=torch.float64).to(x.device)
    keys, order = (unit(x) @ r).sort()
    at = torch.searchsorted(keys, (unit(o) @ r).contiguous())
    # the rows whose keys lie nearest (rounding may reorder near ties): the one nearest in direction
    near = order[(at[None] + torch.arange(-4, 4, device=at.device)[:, None]).clamp(0, len(keys) - 1)]
    dist = (unit(x)[near] - unit(o)[None]).norm(dim=-1)  # (8, observed rows)
    best = near.gather(0, dist.argmin(0, keepdim=True))[0]
    return "as a subset of rows" if fit(o, x[best], tol) else None


def probs_match(p: Tensor, q: Tensor, k: Tensor, tol: float) -> bool:
    """Whether P (the softmax over the keys the call computed) is softmax(s·q kᵀ + mask) for one s > 0, q and
    k (B, G, H, n, d_h) inferred: log P, centred over each row's unmasked keys, equals s times the logits
    centred the same way. Masked keys (P = 0) and keys of negligible mass are left out; an additive bias
    (ALiBi, a relative bias) leaves a residual, and nothing is proven."""
    if p.numel() != q.shape[:-1].numel() * k.shape[-2] or q.shape[-3] != k.shape[-3]:
        return False
    probs = p.reshape(*q.shape[:-1], k.shape[-2]).to(torch.float64)
    logits = q @ k.transpose(-1, -2)
    keep = probs > 1e-6
    if int(keep.sum()) < 2 * keep.shape[-2] or not bool((keep.sum(-1) > 1).any()):
        return False
    count = keep.sum(-1, keepdim=True).clamp(min=1)
    lp = torch.where(keep, probs.clamp_min(1e-300).log(), 0.0)
    lg = torch.where(keep, logits, 0.0)
    lp = torch.where(keep, lp - lp.sum(-1, keepdim=True) / count, 0.0)
    lg = torch.where(keep, lg - lg.sum(-1, keepdim=True) / count, 0.0)
    return fit(lp, lg, tol)
