"""Per-sample matrices out of captured batches, and their spectra computed in same-shape groups.

Padding is removed per sample (SPEC §1), so text samples have different N; samples of equal shape are
stacked and summarised together, and every result is put back in sample order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from condcli.spectra import summarize
from condcli.spectra.core import Method


def trim(t: torch.Tensor, lengths: torch.Tensor | None, token_dims: Sequence[int]) -> list[torch.Tensor]:
    """Split a batch (B, ...) into samples, cutting each ``token_dims`` axis (of the sample) to its length."""
    if lengths is None:
        return list(t.unbind(0))
    out = []
    for b, n in enumerate(lengths.tolist()):
        m = t[b]
        for dim in token_dims:
            m = m.narrow(dim, 0, int(n))
        out.append(m)
    return out


@dataclass(frozen=True)
class Summaries:
    """Spectral summaries of S samples, each a stack of matrices with the same leading shape ``lead``."""

    sigma: list[torch.Tensor]  # per sample (*lead, k), descending float64
    kappa: torch.Tensor  # (S, *lead)
    rank: torch.Tensor  # (S, *lead) numerical rank at the capture dtype's tolerance
    below: torch.Tensor  # (S, *lead) σ_k ≤ tol: below the capture dtype's resolution


def summarize_samples(
    mats: Sequence[torch.Tensor], capture_dtype: torch.dtype | str, method: Method = "auto"
) -> Summaries:
    """:func:`condcli.spectra.summarize` of every sample, in sample order.

    ``method="auto"``: the Gram path with SVD fallback (activations); ``"svd"`` where the matrices are
    expected to be ill-conditioned, so a Gram attempt would only be thrown away (attention probabilities).
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, m in enumerate(mats):
        groups.setdefault(tuple(m.shape), []).append(i)
    sigma: list[torch.Tensor | None] = [None] * len(mats)
    kappa: list[torch.Tensor | None] = [None] * len(mats)
    rank: list[torch.Tensor | None] = [None] * len(mats)
    below: list[torch.Tensor | None] = [None] * len(mats)
    for idx in groups.values():
        s = summarize(torch.stack([mats[i] for i in idx]), capture_dtype, method=method)
        for j, i in enumerate(idx):
            sigma[i], kappa[i], rank[i], below[i] = (
                s.sigma[j],
                s.kappa[j],
                s.numerical_rank[j],
                s.below_precision[j],
            )
    return Summaries(
        sigma=[s for s in sigma if s is not None],
        kappa=torch.stack([k for k in kappa if k is not None]).cpu(),
        rank=torch.stack([r for r in rank if r is not None]).cpu(),
        below=torch.stack([b for b in below if b is not None]).cpu(),
    )
