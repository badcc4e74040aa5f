"""The affine maps a generic attention may project Q, K and V with, read as (weight (out, in), bias).

- an nn.Linear; a 1×1 nn.Conv1d or nn.Conv2d, the convolution's weight flattened (block-diagonal where
  it is grouped); a quantization wrapper of a Linear (``…Linear`` holding its weight, ``Quant…`` around
  one, a ``…Linear`` holding one as ``linear``); transformers' GPT-2-style ``Conv1D`` (its weight stored
  in × out, transposed);
- one of them followed by a BatchNorm (LeViT's LinearNorm and ConvNorm, timm EfficientViT-M/SHViT's
  ConvNorm), read as in eval: the BatchNorm folded into W and b;
- plain ``nn.Parameter`` s the attention owns (``w_q``, ``Wq``, ``q_proj_weight``, …, with optional biases):
  a hand-written attention multiplies ``x @ W`` (W: in × out) or ``F.linear(x, W)`` (W: out × in); the
  first is read, the other kept as the alternative that the first batch's proof may choose instead
  (:mod:`condcli.adapters.generic.verify`).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import nn

Tensor = torch.Tensor
Map = tuple[Tensor, Tensor | None]  # weight (out, in), bias (out,)
Orientation = Literal["x @ W", "F.linear(x, W)"]

# the names of plain parameters holding W_Q, W_K, W_V (compared in lower case), and of their biases
PARAM_WEIGHTS = {
    "q": ("w_q", "wq", "q_weight", "weight_q", "q_proj_weight", "query_weight", "w_query"),
    "k": ("w_k", "wk", "k_weight", "weight_k", "k_proj_weight", "key_weight", "w_key"),
    "v": ("w_v", "wv", "v_weight", "weight_v", "v_proj_weight", "value_weight", "w_value"),
}
PARAM_BIASES = {
    "q": ("b_q", "bq", "q_bias", "bias_q", "query_bias"),
    "k": ("b_k", "bk", "k_bias", "bias_k", "key_bias"),
    "v": ("b_v", "bv", "v_bias", "bias_v", "value_bias"),
}


def linear_map(m: Any) -> Map | None:
    """(weight (out, in), bias) of the affine map ``m`` computes; None where it is not one of those above."""
    if not isinstance(m, nn.Module):
        return None
    if isinstance(m, nn.Linear):
        return m.weight, m.bias
    w, b = getattr(m, "weight", None), getattr(m, "bias", None)
    if type(m).__name__ == "Conv1D" and isinstance(w, torch.Tensor):
        return w.T, b if isinstance(b, torch.Tensor) else None  # transformers' Conv1D: W stored (in, out)
    if isinstance(m, nn.Conv1d | nn.Conv2d) and all(k == 1 for k in m.kernel_size):
        padding = m.padding if isinstance(m.padding, str) else "valid" if not any(m.padding) else "padded"
        if all(s == 1 for s in m.stride) and padding in ("valid", "same"):
            return _grouped(m.weight.flatten(1), m.groups), m.bias
    if (
        isinstance(w, torch.Tensor)
        and w.ndim == 2
        and type(m).__name__.endswith("Linear")
        and not any(True for _ in m.children())
    ):  # a quantization wrapper holding a Linear's weight (I-BERT's QuantLinear, quantization off)
        return w, b if isinstance(b, torch.Tensor) and b.ndim == 1 else None
    inner = [c for c in m.children() if isinstance(c, nn.Linear)]
    if (
        len(inner) == 1
        and not any(True for _ in m.parameters(recurse=False))
        and len(list(m.children())) <= 2
    ):
        name = type(m).__name__
        if "quant" in name.lower() or (name.endswith("Linear") and getattr(m, "linear", None) is inner[0]):
            # a quantization wrapper around a plain Linear, or a ``…Linear`` holding one as ``linear``
            # (Moshi's MoshiLinear with flexible linear off); the first batch's proof checks what it computes
            return inner[0].weight, inner[0].bias
    lin, bn = linear_map(getattr(m, "linear", None) or getattr(m, "c", None)), getattr(m, "bn", None)
    if lin is not None and isinstance(bn, nn.BatchNorm1d | nn.BatchNorm2d) and bn.running_var is not None:
        assert bn.running_mean is not None
        (w, b), var = lin, bn.running_var
        scale = (bn.weight if bn.weight is not None else 1) / torch.sqrt(var + bn.eps)
        shift = (bn.bias if bn.bias is not None else 0) - bn.running_mean * scale
        return w * scale[:, None], shift if b is None else b * scale + shift
    return None


def own_parameters(module: nn.Module) -> dict[str, Tensor]:
    """The parameters ``module`` holds itself (not its children's), by lower-case name."""
    return {n.lower(): p for n, p in module.named_parameters(recurse=False)}


def param_projections(module: nn.Module) -> dict[str, tuple[Tensor, Tensor | None]] | None:
    """role → (2-D weight as stored, bias) where ``module`` holds W_Q, W_K and W_V as plain parameters of
    one shape; None where it does not."""
    own = own_parameters(module)
    found: dict[str, tuple[Tensor, Tensor | None]] = {}
    for role, names in PARAM_WEIGHTS.items():
        w = next((own[n] for n in names if n in own), None)
        if w is None or w.ndim != 2:
            return None
        b = next((own[n] for n in PARAM_BIASES[role] if n in own and own[n].ndim == 1), None)
        found[role] = (w, b)
    if len({tuple(w.shape) for w, _ in found.values()}) != 1:
        return None
    return found


def param_map(w: Tensor, b: Tensor | None, orientation: Orientation) -> Map:
    """A stored parameter W read as the (out, in) weight of the map it computes."""
    return (w.T if orientation == "x @ W" else w), b


def _grouped(w: Tensor, groups: int) -> Tensor:
    """A grouped 1×1 convolution's weight (out, in/groups) as the block-diagonal (out, in) map it computes
    (SqueezeBERT's q/k/v: each group of outputs reads its own group of input channels)."""
    if groups == 1:
        return w
    out, width = int(w.shape[0]), int(w.shape[1])
    full = w.new_zeros(out, width * groups)
    per = out // groups
    for g in range(groups):
        full[g * per : (g + 1) * per, g * width : (g + 1) * width] = w[g * per : (g + 1) * per]
    return full
