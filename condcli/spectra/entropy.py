"""Normalised attention entropy (the entropy-collapse signal of Zhai et al. 2023), float64, batched."""

from __future__ import annotations

import torch

from condcli.spectra._tensor import Tensorish, as_float64, check_finite


def attention_entropy(P: Tensorish, *, causal: bool = False) -> torch.Tensor:
    """(..., q, k) attention probabilities → (...,): the mean over queries of −Σ_j p_j log p_j / log s.

    s is the number of keys the query may attend to, from the mask's structure (never from P's zeros, which
    a collapsed softmax also produces): k, or under a causal mask i + 1 + (k − q) for query i (the last q
    of k positions). 1 means uniform over those keys, 0 all weight on one. A query that may attend to one
    key only has no entropy to lose (0/0) and is left out; a matrix with no other query (a one-token
    sample) is 1 by that convention.
    """
    p = as_float64(P)
    check_finite(p)
    q, k = p.shape[-2:]
    h: torch.Tensor = -torch.special.xlogy(p, p).sum(-1)  # (..., q); 0·log 0 = 0
    support = torch.full((q,), k, dtype=p.dtype, device=p.device)
    if causal:
        support = torch.clamp(torch.arange(q, device=p.device, dtype=p.dtype) + 1 + (k - q), max=k)
    valid = support > 1
    if not bool(valid.any()):
        return torch.ones(p.shape[:-2], dtype=p.dtype, device=p.device)
    return (h[..., valid] / torch.log(support[valid])).mean(-1)
