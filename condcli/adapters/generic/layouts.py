"""How a tensor an attention layer reads holds its tokens, and the probes that read it that way.

A block or attention input may be tokens (B, N, c), channels-last (B, H, W, c), channels-first (B, c, H, W),
or groups with the batch folded into the leading axis (B·G, n, c): windows, mask units, unfolded patches.
The channel axis is the one as wide as the attention's projections (``width``); where a leading axis folds
the batch, ``grouping`` says whether the images are outermost (index b·G + g, timm/HF windows) or
innermost (index g·B + b).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from condcli.adapters.base import first_input, first_output
from condcli.layout import Layout, to_tokens

Grouping = Literal["outer", "inner"]
Tensor = torch.Tensor


def layout_of(x: Tensor, width: int) -> Layout | None:
    """The layout of ``x`` whose channel axis is ``width`` wide; None where no axis fits."""
    if x.ndim == 3 and x.shape[-1] == width:
        return "tokens"
    if x.ndim == 4 and x.shape[-1] == width:
        return "nhwc"
    if x.ndim == 4 and x.shape[1] == width:
        return "nchw"
    return None


def grouped(x: Tensor, batch: int, grouping: Grouping) -> Tensor:
    """(B·G, ...) → (B, G, ...), the images outermost or innermost on the leading axis."""
    if grouping == "outer":
        return x.reshape(batch, -1, *x.shape[1:])
    return x.reshape(-1, batch, *x.shape[1:]).transpose(0, 1)


def tokens(x: Tensor, width: int, layout: Layout | None, batch: int, grouping: Grouping) -> Tensor:
    """Any supported layout → (B, G, n, c): each image's groups of tokens (G = 1 where nothing is folded)."""
    found = layout or layout_of(x, width) or "tokens"
    t = to_tokens(x, found)
    if t.ndim != 3:
        t = t.reshape(t.shape[0], -1, t.shape[-1])
    return grouped(t, batch, grouping)


def attention_input(
    width: int,
    layout: Layout | None,
    grouping: Grouping,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    output: Any,
    batch: int,
) -> Tensor:
    """A_l: the attention module's first input as (B, G, n, c)."""
    return tokens(first_input(args, kwargs, output, batch), width, layout, batch, grouping)


def stream_input(
    width: int,
    layout: Layout | None,
    grouping: Grouping,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    output: Any,
    batch: int,
) -> Tensor:
    """X_l: the block's (or pre-norm's) first input as (B, N, d), an image's groups side by side."""
    return attention_input(width, layout, grouping, args, kwargs, output, batch).flatten(1, 2)


def probs(p: Tensor, heads: int, batch: int, grouping: Grouping) -> Tensor:
    """P as a module computed it → (B, G, H, q, k).

    (B·G, H, q, k) is grouped like the attention's input; (B, H, G, q, k) and (B, G, H, q, k), a module that
    groups its input itself (Hiera's mask units, Twins' windows), are told apart by where the heads are.
    """
    if p.ndim == 4:
        return grouped(p, batch, grouping)
    if p.ndim == 5 and p.shape[0] == batch:
        return p.transpose(1, 2) if p.shape[1] == heads and p.shape[2] != heads else p
    return grouped(p.reshape(-1, *p.shape[-3:]), batch, grouping)


def module_probs(
    heads: int, grouping: Grouping, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int
) -> Tensor:
    """P as an ``nn.Softmax`` module's output."""
    return probs(first_output(args, kwargs, output, batch), heads, batch, grouping)


def tapped(
    heads: int, grouping: Grouping, args: tuple[Any, ...], kwargs: dict[str, Any], seen: Any, batch: int
) -> Tensor | None:
    """P as a softmax tap saw it inside the attention's call (None: it saw none)."""
    if not isinstance(seen, Tensor) or seen.ndim < 4 or seen.shape[0] % batch:
        return None
    return probs(seen, heads, batch, grouping)


def grouping_of(t: Tensor, batch: int) -> Grouping | None:
    """How the leading axis of ``t`` holds ``batch`` identical images: "outer" (equal halves) or "inner"
    (equal neighbours); None where it holds no whole number of images or neither holds."""
    lead = int(t.shape[0])
    if lead == batch:
        return "outer"
    if lead % batch:
        return None
    flat = t.detach().double().reshape(lead, -1)
    scale = float(flat.abs().max()) or 1.0

    def same(a: Tensor, b: Tensor) -> bool:
        return bool(((a - b).abs() <= 1e-4 * scale).all())

    outer = flat.reshape(batch, -1)
    if same(outer[0], outer[1]):
        return "outer"
    inner = flat.reshape(-1, batch, flat.shape[-1])
    if same(inner[:, 0], inner[:, 1]):
        return "inner"
    return None
