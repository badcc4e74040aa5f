"""Per-sample matrices out of captured batches, and their spectra computed in same-shape groups.

Padding is removed per sample (docs/math.md#x), so text samples have different N; samples of equal shape are
stacked and summarised together, and every result is put back in sample order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from condcli.errors import InputError
from condcli.spectra import causal, summarize
from condcli.spectra.core import Method
from condcli.spectra.uncertainty import rel_of


class ShortenedSequence(InputError):
    """A token axis shorter than the samples (a block after pooling, a chunk of keys) while the samples are
    padded to unequal lengths: which of its rows are padding cannot be told (issue 42)."""

    def __init__(self, size: int, lengths: Sequence[int]) -> None:
        self.size, self.lengths = size, tuple(lengths)
        super().__init__(
            f"[inputs] it runs at {size} tokens where the model was given {max(lengths)} (the sequence is "
            f"shortened, pooled or chunked before it), and the samples are padded to unequal lengths "
            f"({', '.join(map(str, lengths))}): which of its {size} rows are padding cannot be told",
            "give samples of one length (e.g. `max_samples=1`, or texts that fill the model's length)",
        )


def trim(t: torch.Tensor, lengths: torch.Tensor | None, token_dims: Sequence[int]) -> list[torch.Tensor]:
    """Split a batch (B, ...) into samples, cutting each ``token_dims`` axis (of the sample) to its length.

    An axis shorter than the longest sample (a block whose sequence was shortened or pooled, P over a chunk
    of keys) is kept at its own length where no sample is padded, and raises :class:`ShortenedSequence`
    where samples are (its rows cannot be matched to tokens)."""
    if lengths is None:
        return list(t.unbind(0))
    ns = [int(n) for n in lengths.tolist()]
    dims = []
    for dim in token_dims:
        size = int(t.shape[dim + 1])
        if size >= max(ns, default=0):
            dims.append(dim)
        elif len(set(ns)) > 1:
            raise ShortenedSequence(size, ns)
    out = []
    for b, n in enumerate(ns):
        m = t[b]
        for dim in dims:
            m = m.narrow(dim, 0, n)
        out.append(m)
    return out


def distinct_rows(m: torch.Tensor) -> torch.Tensor:
    """(..., n, c) → (...,) int64: how many of each matrix's n rows are distinct, compared exactly (a RoPE
    decoder's X is a lookup of token embeddings, so every repeated token is a repeated row)."""
    lead = m.shape[:-2]
    flat = m.reshape(-1, *m.shape[-2:])
    counts = [int(torch.unique(x, dim=0).shape[0]) for x in flat]
    return torch.tensor(counts, dtype=torch.int64).reshape(lead)


def first_distinct(m: torch.Tensor) -> torch.Tensor:
    """(n, c) → (r, c): the distinct rows of one matrix at their first occurrences, in order."""
    _, inverse = torch.unique(m, dim=0, return_inverse=True)
    n = int(m.shape[0])
    first = torch.full((int(inverse.max()) + 1 if n else 0,), n, dtype=torch.int64, device=m.device)
    first.scatter_reduce_(0, inverse, torch.arange(n, device=m.device), reduce="amin")
    return m[first.sort().values]


@dataclass(frozen=True)
class Summaries:
    """Spectral summaries of S samples, each a stack of matrices with the same leading shape ``lead``.

    With ``repeats`` (:func:`summarize_samples`), a matrix whose distinct rows are fewer than k = min(n, c)
    is exactly singular: its κ is ``inf`` (reported, measured: uncertainty 0), ``repeated`` marks it, and it
    is not ``below`` (repetition, not rounding, is the cause: docs/math.md#repeated-rows).
    """

    sigma: list[torch.Tensor]  # per sample (*lead, k), descending float64
    kappa: torch.Tensor  # (S, *lead)
    rank: torch.Tensor  # (S, *lead) numerical rank at the capture dtype's tolerance
    below: torch.Tensor  # (S, *lead) σ_k ≤ tol: below the capture dtype's resolution, κ only a floor
    reported: torch.Tensor  # (S, *lead) the κ to report: measured, or the floor σ_1/tol where ``below``
    uncertainty: torch.Tensor  # (S, *lead) its relative uncertainty tol/σ_k (inf for a floor; rel_of)
    distinct: torch.Tensor | None = None  # (S, *lead) distinct rows (``repeats``), else None
    repeated: torch.Tensor | None = None  # (S, *lead) fewer distinct rows than k: κ = inf exactly

    def without(self, repeated: torch.Tensor) -> Summaries:
        """These summaries with every ``repeated`` matrix's κ made the exact ``inf`` it is."""
        inf = torch.full_like(self.kappa, torch.inf)
        return Summaries(
            sigma=self.sigma,
            kappa=torch.where(repeated, inf, self.kappa),
            rank=self.rank,
            below=self.below & ~repeated,
            reported=torch.where(repeated, inf, self.reported),
            uncertainty=torch.where(repeated, torch.zeros_like(self.uncertainty), self.uncertainty),
            distinct=self.distinct,
            repeated=repeated,
        )


def summarize_samples(
    mats: Sequence[torch.Tensor],
    capture_dtype: torch.dtype | str,
    method: Method = "auto",
    *,
    exact_spectrum: bool = True,
    repeats: bool = False,
) -> Summaries:
    """:func:`condcli.spectra.summarize` of every sample, in sample order, with floors (docs/math.md#spectra).

    ``method="auto"``: the Gram path where it settles κ within 1e-6 of SVD's or certifies a floor, SVD
    elsewhere (activations); ``"svd"`` where the matrices are expected to be ill-conditioned and the Gram path
    cannot decide floors at the capture dtype, so a Gram attempt would only be thrown away (attention
    probabilities in float32). ``exact_spectrum=False``: a Gram-certified floor gets no SVD (its σ below tol
    is noise; the caller does not report it). ``repeats``: count each matrix's distinct rows, and where they
    are fewer than k = min(n, c) report κ = inf exactly, not a floor (:class:`Summaries`).
    """
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, m in enumerate(mats):
        groups.setdefault(tuple(m.shape), []).append(i)
    sigma: list[torch.Tensor | None] = [None] * len(mats)
    kappa: list[torch.Tensor | None] = [None] * len(mats)
    rank: list[torch.Tensor | None] = [None] * len(mats)
    below: list[torch.Tensor | None] = [None] * len(mats)
    reported: list[torch.Tensor | None] = [None] * len(mats)
    rel: list[torch.Tensor | None] = [None] * len(mats)
    for idx in groups.values():
        stack = torch.stack([mats[i] for i in idx])
        if not exact_spectrum and causal.applies(stack):  # causal P: Lanczos brackets, O(n²) a step
            s = causal.summarize_causal(stack, capture_dtype)
        else:
            s = summarize(stack, capture_dtype, method=method, floors=True, exact_spectrum=exact_spectrum)
        shown = s.reported
        r = rel_of(s.sigma_min, s.tolerance, s.below_precision)
        for j, i in enumerate(idx):
            sigma[i], kappa[i], rank[i], below[i], reported[i], rel[i] = (
                s.sigma[j],
                s.kappa[j],
                s.numerical_rank[j],
                s.below_precision[j],
                shown[j],
                r[j],
            )
    out = Summaries(
        sigma=[s for s in sigma if s is not None],
        kappa=torch.stack([k for k in kappa if k is not None]).cpu(),
        rank=torch.stack([r for r in rank if r is not None]).cpu(),
        below=torch.stack([b for b in below if b is not None]).cpu(),
        reported=torch.stack([r for r in reported if r is not None]).cpu(),
        uncertainty=torch.stack([r for r in rel if r is not None]).cpu(),
    )
    if not repeats or not mats:
        return out
    distinct = torch.stack([distinct_rows(m) for m in mats])
    k = torch.tensor([min(int(m.shape[-2]), int(m.shape[-1])) for m in mats]).reshape(
        -1, *([1] * (distinct.dim() - 1))
    )
    return replace(out, distinct=distinct).without(distinct < k)


# float64 bytes of P handed to the spectra at once, beyond one head per torch thread: a layer's P of a long
# sequence is H × n² numbers per sample (12 × 2048² = 384 MiB in float64), and the spectra upcast all
# they are given before the first decomposition
CHUNK_BYTES = 64 * 2**20


def head_chunks(mats: Sequence[torch.Tensor], dim: int = 1) -> list[list[torch.Tensor]]:
    """Per-sample stacks (e.g. P, (G, H, q, k)) cut along the head axis ``dim`` into views of a few heads.

    A chunk holds as many heads as keep its float64 copy within :data:`CHUNK_BYTES`, and at least one per
    torch thread (each decomposition is still one matrix per call, so results do not depend on the cut).
    Short sequences (ViT-B: 197 tokens) stay one chunk.
    """
    if not mats:
        return []
    heads = int(mats[0].shape[dim])
    per_head = 8 * sum(m.numel() for m in mats) // max(heads, 1)
    step = max(torch.get_num_threads(), CHUNK_BYTES // max(per_head, 1), 1)
    return [[m.narrow(dim, h, min(step, heads - h)) for m in mats] for h in range(0, heads, step)]


def summarize_heads(
    mats: Sequence[torch.Tensor], capture_dtype: torch.dtype | str, method: Method = "auto"
) -> Summaries:
    """:func:`summarize_samples` of per-sample stacks (G, H, q, k), a chunk of heads at a time
    (:func:`head_chunks`): the same summaries, without a float64 copy of every head at once. Only κ and the
    flags are used from these, so a Gram-certified floor gets no SVD."""
    parts = [
        summarize_samples(chunk, capture_dtype, method, exact_spectrum=False) for chunk in head_chunks(mats)
    ]
    if len(parts) == 1:
        return parts[0]
    return Summaries(
        sigma=[torch.cat(per_sample, dim=1) for per_sample in zip(*(s.sigma for s in parts), strict=True)],
        kappa=torch.cat([s.kappa for s in parts], dim=2),
        rank=torch.cat([s.rank for s in parts], dim=2),
        below=torch.cat([s.below for s in parts], dim=2),
        reported=torch.cat([s.reported for s in parts], dim=2),
        uncertainty=torch.cat([s.uncertainty for s in parts], dim=2),
    )


def distinct_summaries(
    mats: Sequence[torch.Tensor], capture_dtype: torch.dtype | str, whole: Summaries
) -> Summaries:
    """κ over the distinct rows of each 2-D sample (first occurrences, in order: docs/math.md#repeated-rows),
    at the same resolution: ``whole`` (a :func:`summarize_samples` with ``repeats``) where no row repeats, a
    summary of the distinct rows elsewhere. Its floors are those of the distinct rows."""
    if whole.distinct is None:
        raise ValueError("distinct_summaries needs summaries made with repeats=True")
    redo = [i for i, m in enumerate(mats) if int(whole.distinct[i]) < int(m.shape[-2])]
    if not redo:
        return replace(whole, repeated=torch.zeros_like(whole.below))
    sub = summarize_samples([first_distinct(mats[i]) for i in redo], capture_dtype)
    idx = torch.tensor(redo)
    sigma = list(whole.sigma)
    for j, i in enumerate(redo):
        sigma[i] = sub.sigma[j]

    def put(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = a.clone()
        out[idx] = b
        return out

    return Summaries(
        sigma=sigma,
        kappa=put(whole.kappa, sub.kappa),
        rank=put(whole.rank, sub.rank),
        below=put(whole.below, sub.below),
        reported=put(whole.reported, sub.reported),
        uncertainty=put(whole.uncertainty, sub.uncertainty),
        distinct=whole.distinct,
        repeated=torch.zeros_like(whole.below),
    )
