"""What an attention call consumes as q, k and v, watched from inside (a ``TorchFunctionMode``).

The operands of its products (``@``/``matmul``, ``bmm``, ``baddbmm`` and two-operand ``einsum`` with one
contracted index) and the arguments of ``F.scaled_dot_product_attention`` are recorded per role, oriented
(..., n, d_h): q a left operand, k the transpose of a right one (Q·Kᵀ), v a right one (P·V); and the last
softmax over the last axis, P. Every call is
passed through unchanged: the model computes what it would. :mod:`condcli.adapters.generic.verify` compares
them with the generic path's inferred projections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from condcli.adapters.softmax_tap import SOFTMAXES

Tensor = torch.Tensor
ROLES = ("q", "k", "v")
PRODUCTS = frozenset(
    {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm}
)
ADD_PRODUCTS = frozenset({torch.baddbmm, torch.Tensor.baddbmm})
SDPA = nn.functional.scaled_dot_product_attention


class Watch(TorchFunctionMode):
    """Records, per role, the tensors an attention call consumes (oriented (..., n, d_h)); passes every call
    through unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[Tensor]] = {r: [] for r in ROLES}
        self.probs: Tensor | None = None  # the last softmax over the last axis of a ≥ 3-D tensor: P

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in PRODUCTS:
            self._product(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "other", "mat2"))
        elif func in ADD_PRODUCTS:  # Bloom: alibi.baddbmm(batch1=q, batch2=kᵀ, beta=…, alpha=…)
            self._product(_arg(args, kwargs, 1, "batch1"), _arg(args, kwargs, 2, "batch2"))
        elif func is torch.einsum and len(args) == 3 and isinstance(args[0], str):
            self._einsum(args[0], args[1], args[2])
        elif func is SDPA:
            names = ("query", "key", "value")
            got = [args[i] if len(args) > i else kwargs.get(n) for i, n in enumerate(names)]
            for role, t in zip(ROLES, got, strict=True):
                if isinstance(t, Tensor) and t.ndim >= 3:
                    self.seen[role].append(t.detach())
        out = func(*args, **kwargs)
        if func in SOFTMAXES and isinstance(out, Tensor) and out.ndim >= 3:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if isinstance(dim, int) and dim % out.ndim == out.ndim - 1:
                self.probs = out.detach()
        return out

    def _product(self, a: Any, b: Any) -> None:
        if not (isinstance(a, Tensor) and isinstance(b, Tensor) and a.ndim >= 3 and b.ndim >= 3):
            return
        if not (a.is_floating_point() and b.is_floating_point()):
            return
        self.seen["q"].append(a.detach())
        self.seen["k"].append(b.detach().transpose(-1, -2))
        self.seen["v"].append(b.detach())

    def _einsum(self, equation: str, a: Any, b: Any) -> None:
        """A two-operand einsum with one contracted index read as the product (…, i, c) @ (…, c, j): each
        operand permuted to its shared (batch) indices, then its free index and the contracted one."""
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or "->" not in equation:
            return
        ins, out = equation.replace(" ", "").split("->")
        parts = ins.split(",")
        if len(parts) != 2 or "." in equation or len(parts[0]) != a.ndim or len(parts[1]) != b.ndim:
            return
        sa, sb = parts
        contracted = [c for c in sa if c in sb and c not in out]
        free_a, free_b = [c for c in sa if c not in sb], [c for c in sb if c not in sa]
        shared = [c for c in sa if c in sb and c in out]
        if len(contracted) != 1 or len(free_a) != 1 or len(free_b) != 1 or len(shared) + 2 != a.ndim:
            return
        left = a.permute(*[sa.index(c) for c in (*shared, free_a[0], contracted[0])])
        right = b.permute(*[sb.index(c) for c in (*shared, contracted[0], free_b[0])])
        self._product(left, right)


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, *names: str) -> Any:
    """Positional argument ``i`` of a call, else the first of its keyword ``names`` given."""
    if len(args) > i:
        return args[i]
    return next((kwargs[n] for n in names if n in kwargs), None)
