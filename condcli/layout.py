"""How a module stores its tokens, and the two reshapes between that and the (B, N, d) token matrices.

A neutral module: the adapters (where X and X_l are taken), :mod:`condcli.conditioning` (which shifts X
in the layout its module keeps it) and :mod:`condcli.capture` all read it, and it imports none of them.
"""

from __future__ import annotations

from typing import Literal

import torch

Layout = Literal["tokens", "nhwc", "nchw"]  # (B, N, d) · (B, H, W, d) · (B, d, H, W)


def to_tokens(x: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Any supported layout → (B, N, d), tokens in row-major spatial order."""
    if layout == "tokens":
        return x
    if layout == "nhwc":
        return x.reshape(x.shape[0], -1, x.shape[-1])
    return x.flatten(2).transpose(1, 2)  # nchw


def from_tokens(tokens: torch.Tensor, like: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Inverse of :func:`to_tokens`: put (B, N, d) back into the layout (and shape) of ``like``."""
    if layout == "tokens":
        return tokens
    if layout == "nhwc":
        return tokens.reshape(like.shape)
    return tokens.transpose(1, 2).reshape(like.shape)
