"""How the generic path reads one attention module of a vision model: its Q/K/V projections and heads.

Beyond the fused and separate projections of :mod:`condcli.adapters.generic.heads` (tried last), this
reads the layouts hierarchical and hybrid vision models use (docs/math.md#layers):

- ``q`` + ``kv`` (PVT-v2, Twins GSA, attention pooling): K and V stacked [K | V] in ``kv``;
- ``qk`` + ``v`` (TNT): Q and K stacked in ``qk``;
- per-head [q | k | v] of unequal widths, ``key_dim`` and ``val_dim`` (LeViT, EfficientFormer), and LeViT's
  ``kv`` + subsampled ``q`` downsampling attention; a Linear followed by BatchNorm1d (LeViT's LinearNorm)
  is read as the eval-mode map it computes, the BatchNorm folded into W and b;
- head-first ``qkv``, each head's q, k, v side by side (MaxViT ``head_first``);
- GCViT's global attention: K, V from ``qkv`` (2·d rows); the queries are the stage's global query tokens,
  used with no projection (W_Q is the identity).

A :class:`Reading` also says where Q or K/V come from when not from every token of A_l (class attention,
spatial reduction, pooling, subsampling), so the report can name a non-square P.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import FusedLayout, HeadWeights, fused_qkv, head_split
from condcli.adapters.generic.heads import (
    HEAD_ATTRS,
    PARAMS,
    count,
    count_heads,
    fused_layout,
    head_weights,
    param_weights,
    projections,
    read_from_source,
)
from condcli.adapters.generic.maps import linear_map, param_projections

Tensor = torch.Tensor


@dataclass(frozen=True)
class Reading:
    """One attention module's projections as the generic path reads them."""

    kind: str  # the projections read: "separate", "qkv", "q + kv", "qk + v", "per-head q|k|v", …
    heads: int | None  # None: the head count was not found (read as one head)
    kv_heads: int
    width: int  # the projections' input width: the channel count of A_l
    weights: Callable[[], HeadWeights]
    known: bool = True  # False: a fused projection of unknown layout, split as [Q | K | V] (a guess)
    queries: str | None = None  # where the queries come from, when not from every token of A_l
    keys: str | None = None  # where the keys and values come from, when not from A_l's tokens
    windows: str | None = None  # how the module groups its input itself: "in mask units", "over channels"
    # other readings of the same weights, tried in turn where the first batch does not prove ``weights``
    # (a parameter's orientation, an unknown fused layout); never used unproven
    alternatives: tuple[Callable[[], HeadWeights], ...] = ()


def _rows(w: Tensor, b: Tensor | None, rows: Tensor) -> tuple[Tensor, Tensor | None]:
    """The right-multiplying d × r matrix and bias of the given output rows."""
    return w[rows].T, None if b is None else b[rows]


def _per_head(
    qkv: tuple[Tensor, Tensor | None], heads: int, widths: tuple[int, ...]
) -> list[tuple[Tensor, Tensor | None]]:
    """Split a projection whose rows are (H, Σ widths), each head's parts side by side, into its parts."""
    w, b = qkv
    r = torch.arange(w.shape[0]).view(heads, sum(widths))
    out, start = [], 0
    for width in widths:
        out.append(_rows(w, b, r[:, start : start + width].flatten()))
        start += width
    return out


def _split(parts: list[tuple[Tensor, Tensor | None]], heads: int, kv_heads: int | None = None) -> HeadWeights:
    (wq, bq), (wk, bk), (wv, bv) = parts
    return head_split((wq, wk, wv), (bq, bk, bv), heads, kv_heads or heads)


def _stacked(m: Any, parts: int) -> list[tuple[Tensor, Tensor | None]]:
    """A projection ``m`` whose rows are ``parts`` equal blocks stacked (e.g. [K | V])."""
    mapped = linear_map(m)
    assert mapped is not None
    w, b = mapped
    n = w.shape[0] // parts
    return [_rows(w, b, torch.arange(i * n, (i + 1) * n)) for i in range(parts)]


# ------------------------------------------------------------------------------------------------ readers


def _key_value_dims(attn: Any) -> tuple[int, int] | None:
    kd, vd = getattr(attn, "key_dim", None), getattr(attn, "val_dim", None)
    return (kd, vd) if isinstance(kd, int) and isinstance(vd, int) else None


def _levit_like(attn: Any, heads: int) -> Reading | None:
    """Per-head [q | k | v] with widths key_dim, key_dim, val_dim (LeViT, EfficientFormer), or LeViT's
    downsampling attention: per-head [k | v] in ``kv`` and Q from the subsampled tokens."""
    dims = _key_value_dims(attn)
    if dims is None:
        return None
    kd, vd = dims
    qkv, kv = getattr(attn, "qkv", None), getattr(attn, "kv", None)
    qkv_map = linear_map(qkv) if qkv is not None else None
    if qkv_map is not None and qkv_map[0].shape[0] == heads * (2 * kd + vd):
        width = int(qkv_map[0].shape[1])

        def weights() -> HeadWeights:
            mapped = linear_map(qkv)
            assert mapped is not None
            return _split(_per_head(mapped, heads, (kd, kd, vd)), heads)

        return Reading("per-head q|k|v", heads, heads, width, weights)
    q = getattr(attn, "q", None)
    q_lin = q[-1] if isinstance(q, nn.Sequential) else q
    kv_map = linear_map(kv) if kv is not None else None
    q_map = linear_map(q_lin) if q_lin is not None else None
    if kv_map is None or q_map is None or kv_map[0].shape[0] != heads * (kd + vd):
        return None

    def down_weights() -> HeadWeights:
        k, v = _per_head(linear_map(kv), heads, (kd, vd))  # type: ignore[arg-type]
        wq, bq = linear_map(q_lin)  # type: ignore[misc]
        return _split([(wq.T, bq), k, v], heads)

    stride = getattr(attn, "stride", None)
    sub = f"subsampled (stride {stride})" if stride else "subsampled"
    return Reading("kv + subsampled q", heads, heads, int(kv_map[0].shape[1]), down_weights, queries=sub)


def _global_query(attn: Any, heads: int) -> Reading | None:
    """GCViT's WindowAttentionGlobal with ``use_global``: ``qkv`` holds only K and V (2·d rows)."""
    qkv = getattr(attn, "qkv", None)
    if not (getattr(attn, "use_global", False) is True and isinstance(qkv, nn.Linear)):
        return None
    d = int(qkv.in_features)
    if qkv.out_features != 2 * d:
        return None

    def weights() -> HeadWeights:
        (wk, bk), (wv, bv) = _stacked(qkv, 2)
        eye = torch.eye(d, dtype=wk.dtype, device=wk.device)
        return _split([(eye, None), (wk, bk), (wv, bv)], heads)

    queries = "the stage's global query tokens, not A_l (no projection: W_Q is the identity)"
    return Reading("kv (global query)", heads, heads, d, weights, queries=queries)


def _head_first(attn: Any, heads: int) -> Reading | None:
    """MaxViT with ``head_first``: ``qkv`` rows (H, 3·d_h), each head's q, k, v side by side."""
    qkv = getattr(attn, "qkv", None)
    mapped = linear_map(qkv) if qkv is not None else None
    if getattr(attn, "head_first", None) is not True or mapped is None or mapped[0].shape[0] % (3 * heads):
        return None

    def weights() -> HeadWeights:
        w, b = linear_map(qkv)  # type: ignore[misc]
        return fused_qkv(w, b, heads, heads, "per_head")

    return Reading("qkv (head first)", heads, heads, int(mapped[0].shape[1]), weights)


def _pair(attn: Any, heads: int, first: str, second: str) -> Reading | None:
    """Two projections: ``q`` + ``kv`` ([K | V] stacked) or ``qk`` ([Q | K] stacked) + ``v``."""
    a, b = getattr(attn, first, None), getattr(attn, second, None)
    ma, mb = (linear_map(a) if a is not None else None), (linear_map(b) if b is not None else None)
    if ma is None or mb is None or ma[0].shape[1] != mb[0].shape[1]:
        return None

    def weights() -> HeadWeights:
        if first == "q":
            wq, bq = linear_map(a)  # type: ignore[misc]
            return _split([(wq.T, bq), *_stacked(b, 2)], heads)
        wv, bv = linear_map(b)  # type: ignore[misc]
        return _split([*_stacked(a, 2), (wv.T, bv)], heads)

    return Reading(f"{first} + {second}", heads, heads, int(ma[0].shape[1]), weights)


def _conv_qkv(attn: Any, heads: int) -> Reading | None:
    """A fused ``qkv`` 1×1 convolution, [Q | K | V] stacked (Visformer, MaxViT's Attention2d)."""
    qkv = getattr(attn, "qkv", None)
    if not isinstance(qkv, nn.Conv2d) or linear_map(qkv) is None or qkv.out_channels % (3 * heads):
        return None

    def weights() -> HeadWeights:
        w, b = linear_map(qkv)  # type: ignore[misc]
        return fused_qkv(w, b, heads, heads, "stacked")

    return Reading("qkv (1×1 conv)", heads, heads, int(qkv.in_channels), weights)


def _standard(attn: nn.Module) -> Reading | None:
    """The fused and separate projections generic_heads reads (timm qkv, HF q/k/v, nn.MultiheadAttention)."""
    found = projections(attn)
    if found is None:
        return None
    kind, mods = found
    counts = count_heads(attn)
    heads, kv_heads = counts if counts is not None else (None, 1)
    known = kind in ("separate", "mha", PARAMS) or fused_layout(attn, kind)[1]
    first: Any = mods[0]
    h = heads or 1
    others: tuple[Callable[[], HeadWeights], ...] = ()
    if kind == "mha":
        width = int(first.embed_dim)
    elif kind == PARAMS:
        stored = param_projections(attn)
        assert stored is not None
        width = int(stored["q"][0].shape[0])  # read as x @ W: W is in × out
        others = (partial(param_weights, attn, h, kv_heads, "F.linear(x, W)"),)
    else:
        mapped = linear_map(first)
        assert mapped is not None
        width = int(mapped[0].shape[1])
        rows = int(mapped[0].shape[0])
        if not read_from_source(attn, kind) and kv_heads == h and rows % (3 * h) == 0:
            # the catch-all [Q | K | V] is only a first try: each head's q | k | v next
            others = (partial(_fused_as, first, h, "per_head"),)
    weights = partial(head_weights, attn, h, kv_heads)
    return Reading(kind, heads, kv_heads, width, weights, known, alternatives=others)


def _fused_as(m: nn.Module, heads: int, layout: FusedLayout) -> HeadWeights:
    mapped = linear_map(m)
    assert mapped is not None
    return fused_qkv(mapped[0], mapped[1], heads, heads, layout)


def read(attn: nn.Module) -> Reading | None:
    """How ``attn``'s projections are read, or None when it holds no Q/K/V projections the generic path
    knows. Where a module returns None here it is not an attention to the generic path."""
    heads = count(attn, HEAD_ATTRS)
    found = None
    if heads is not None:
        for reader in (_global_query, _levit_like, _head_first):
            found = reader(attn, heads)
            if found is not None:
                break
        else:
            found = _pair(attn, heads, "q", "kv") or _pair(attn, heads, "qk", "v")
    if found is None:
        found = _standard(attn)
    if found is None and heads is not None:
        found = _conv_qkv(attn, heads)
    if found is None:
        return None
    queries, keys, windows = _sources(attn)
    return Reading(
        found.kind,
        found.heads,
        found.kv_heads,
        found.width,
        found.weights,
        found.known,
        found.queries or queries,
        found.keys or keys,
        windows,
        found.alternatives,
    )


def _stride(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "×".join(str(int(v)) for v in value)
    return str(value)


def _sources(attn: Any) -> tuple[str | None, str | None, str | None]:
    """(queries, keys, windows), short: where Q and K/V come from when not every token of A_l, and how the
    module groups its input itself, from the module's own attributes (timm's names)."""
    name = type(attn).__name__
    queries = keys = windows = None
    if name == "ClassAttn":
        queries = "the class token only (P is 1 × N)"
    elif name == "CrossAttention" and hasattr(attn, "wq"):
        queries = "this branch's class token only, over the other branch's patches (P is 1 × N)"
    if getattr(attn, "sr", None) is not None:
        pooled = getattr(attn, "pool", None) is not None
        stride = _stride(getattr(attn, "sr_ratio", None) or attn.sr.stride)
        keys = (
            "average-pooled to a fixed grid, then sr and norm"
            if pooled
            else f"spatially reduced (sr, stride {stride})"
        )
    pool_q, pool_k = getattr(attn, "pool_q", None), getattr(attn, "pool_k", None)
    if pool_q is not None:
        queries = f"pooled (pool_q, stride {_stride(getattr(pool_q, 'stride', '?'))})"
    if pool_k is not None:
        keys = f"pooled (pool_k, pool_v, stride {_stride(getattr(pool_k, 'stride', '?'))})"
    q_stride = getattr(attn, "q_stride", None)
    if isinstance(q_stride, int) and q_stride > 1:
        queries = f"max-pooled over {q_stride} tokens (q_stride)"
    if getattr(attn, "use_mask_unit_attn", False) is True:
        windows = "in mask units"
    ws = getattr(attn, "ws", None)
    if isinstance(ws, int) and ws > 1 and name == "LocallyGroupedAttn":
        windows = f"in {ws}×{ws} windows"
    if isinstance(getattr(attn, "temperature", None), nn.Parameter) and (
        "xca" in name.lower() or "covariance" in name.lower()
    ):
        windows = "over channels (cross-covariance attention: P is d_h × d_h)"
    return queries, keys, windows
