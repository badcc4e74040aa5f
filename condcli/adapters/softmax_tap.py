"""P where an attention computes its softmax as a plain function, observed inside the attention's call.

Most timm attentions (BEiT, EVA, CaiT, MViTv2, Hiera, PVT-v2, …) compute ``attn.softmax(dim=-1)`` in their
forward once fused attention is off: no module to hook, nothing returned. A :class:`SoftmaxTap` is a
``TorchFunctionMode`` that :func:`condcli.capture.capture` enters right before the attention module runs
(a forward pre-hook) and leaves right after it (the forward hook, or capture's ``finally`` where the forward
raised); it records the last softmax over the last dimension computed in that call: P, (B·G, H, q, k).

Which attentions get a tap is decided when the adapter is built, from the module's own code
(:func:`unobservable`): a module whose only softmax normalises another dimension (CoaT's factorized
attention, ``k.softmax(dim=2)``), or which computes none, keeps P unobserved with a note saying what it
computes instead.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from condcli.adapters.base import Probe, group_probs
from condcli.reports.refusal import Refused

# every softmax a forward can call: Tensor.softmax, torch.softmax, F.softmax, torch._softmax, special.softmax
SOFTMAXES = frozenset(
    {
        torch.Tensor.softmax,
        torch.softmax,
        torch._softmax,
        nn.functional.softmax,
        torch.special.softmax,
    }
)


class SoftmaxTap(TorchFunctionMode):
    """Records the last softmax over the last dimension of a ≥ 3-D tensor computed while it is active.

    Calls are passed through unchanged (same function, same arguments): the model computes what it would.
    """

    def __init__(self) -> None:
        super().__init__()
        self.probs: torch.Tensor | None = None
        self.first: torch.Tensor | None = None  # the first of them
        self.count = 0  # softmaxes over the last dimension seen while active

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in SOFTMAXES and isinstance(out, torch.Tensor) and out.ndim >= 3:
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if isinstance(dim, int) and dim % out.ndim == out.ndim - 1:
                self.probs = out
                self.first = out if self.first is None else self.first
                self.count += 1
        return out

    def result(self) -> torch.Tensor | None:
        """The last softmax over the keys seen while active (None: there was none)."""
        return self.probs


class FirstSoftmaxTap(SoftmaxTap):
    """A :class:`SoftmaxTap` that hands over the first softmax over the keys of the call (ConViT's gated
    attention: the content softmax, computed before the positional one it is blended with)."""

    def result(self) -> torch.Tensor | None:
        return self.first


def tapped_probs(
    heads: int, args: tuple[Any, ...], kwargs: dict[str, Any], seen: torch.Tensor | None, batch: int
) -> torch.Tensor | None:
    """What a :class:`SoftmaxTap` saw, as (B, G, H, q, k); None where the call computed no P of a known
    layout: (B·G, H, q, k) with the batch outermost, (B·G·H, q, k), or (B, G, H, q, k) / (B, H, G, q, k)
    (Hiera's mask units) told apart by the head count."""
    if seen is None or seen.shape[0] % batch:
        return None
    if seen.ndim == 4 and seen.shape[1] != heads and seen.shape[0] == batch * heads:
        raise Refused(  # HaloNet: (B·H, blocks, q, k), each block's queries over a halo of keys around it
            "p-unobservable",
            f"P cannot be observed: its softmax is laid {tuple(seen.shape)}: the batch and its {heads} heads "
            f"share the first axis, then {seen.shape[1]} block(s) of {seen.shape[2]} queries, each over its "
            f"own window of {seen.shape[3]} keys (blocked local attention): no one matrix over the tokens' "
            "keys",
            "describe the attention in a TOML file passed as `adapter` (docs/guides/your-own-model.md)",
        )
    if seen.ndim == 4:
        return group_probs(seen, batch)
    if seen.ndim == 3 and (seen.shape[0] // batch) % heads == 0:
        return seen.reshape(batch, -1, heads, *seen.shape[-2:])
    if seen.ndim == 5 and seen.shape[0] == batch:
        if seen.shape[2] == heads:
            return seen
        if seen.shape[1] == heads:
            return seen.transpose(1, 2)
    return None


def softmax_probe(attn: nn.Module, heads: int, per_call: int = 0) -> tuple[Probe | None, str | None]:
    """(the probe that observes ``attn``'s P from inside its call, None) or (None, why P cannot be).

    ``per_call``: the most softmaxes over the keys one call of ``attn`` computed in a trial forward (0: not
    run). Where it computes several and combines them (ConViT's gated positional attention blends a content
    and a position softmax), none alone is the matrix that mixes the tokens: P is not observed.
    """
    why = unobservable(attn)
    if why is None and per_call > 1:
        why = (
            f"P cannot be observed: {type(attn).__name__} computes {per_call} softmaxes over the keys in one "
            "call and combines them (e.g. a gated blend of content and position attention): none alone is "
            "the matrix that mixes the tokens"
        )
    if why is not None:
        return None, why
    return Probe(attn, partial(tapped_probs, heads), after=True, tap=SoftmaxTap), None


# ------------------------------------------------------------------------ what the module's code computes


@dataclass(frozen=True)
class SoftmaxCall:
    """One softmax call in the source: its code and the dimension it normalises (None: not a literal)."""

    code: str
    dim: int | None

    @property
    def over_keys(self) -> bool:
        """Whether it may normalise the last dimension of a (…, q, k) score tensor: dim -1, a dim that is
        not a literal, or one ≥ 3 (the last of a 4-D (B, H, q, k) tensor); dims 0–2 and -2… do not."""
        return self.dim is None or self.dim == -1 or self.dim >= 3


def unobservable(attn: nn.Module) -> str | None:
    """Why a tap cannot observe ``attn``'s P, from the code of its classes (and its submodules'), or None.

    None where a softmax over the keys may be computed, or where the code cannot be read (the tap then
    tells at run time). Else a note saying what the module computes instead.
    """
    name = type(attn).__name__
    if type(attn).__module__.startswith("torch."):
        return f"P cannot be observed: {name} computes its softmax inside PyTorch, with nothing to hook"
    calls: list[SoftmaxCall] = []
    fused = False
    for cls in {type(m) for m in attn.modules()}:
        for c in cls.__mro__:
            if c.__module__.startswith("torch.") or c is object:
                continue
            found = _calls_in(c)
            if found is None:
                return None  # code not readable: let the tap decide at run time
            calls.extend(found[0])
            fused = fused or found[1]
    if any(c.over_keys for c in calls):
        return None
    if calls:
        shown = ", ".join(sorted({f"`{c.code}`" for c in calls}))
        return (
            f"P cannot be observed: {name} computes no softmax over the keys, only {shown} (another "
            "dimension: factorized or linear attention has no q × k probability matrix)"
        )
    how = (
        "runs only F.scaled_dot_product_attention, which never materialises P"
        if fused
        else "computes no softmax"
    )
    return f"P cannot be observed: {name} {how} (no q × k probability matrix to observe)"


@cache
def _calls_in(cls: type) -> tuple[tuple[SoftmaxCall, ...], bool] | None:
    """The softmax calls in ``cls``'s own source and in the module-level functions it calls (one level),
    and whether it calls scaled_dot_product_attention; None where the source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return None
    scope = vars(inspect.getmodule(cls) or types.ModuleType("none"))
    calls, fused = list(_softmaxes(tree, scope)), _sdpa(tree)
    seen: set[Any] = set()
    for node in ast.walk(tree):
        # a function called, or named to call later (HF: attention_interface = eager_attention_forward)
        if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
            fn = _resolve(node, scope)
            if inspect.isfunction(fn) and not fn.__module__.startswith("torch") and fn not in seen:
                seen.add(fn)
                try:
                    inner = ast.parse(textwrap.dedent(inspect.getsource(fn)))
                except (OSError, TypeError, SyntaxError):
                    continue
                calls.extend(_softmaxes(inner, fn.__globals__))
                fused = fused or _sdpa(inner)
    return tuple(calls), fused


def computes_softmax(attn: nn.Module) -> bool:
    """Whether ``attn`` computes a softmax at all, by its code (over any dimension, or inside
    scaled_dot_product_attention, an ``nn.Softmax`` or ``nn.MultiheadAttention``); True where the code
    cannot be read. A module with projections that computes none is no attention (a state-space mixer)."""
    if any(isinstance(m, nn.Softmax | nn.MultiheadAttention) for m in attn.modules()):
        return True
    for cls in {type(m) for m in attn.modules()}:
        for c in cls.__mro__:
            if c.__module__.startswith("torch.") or c is object:
                continue
            found = _calls_in(c)
            if found is None or found[0] or found[1]:
                return True
    return False


def _softmaxes(tree: ast.AST, scope: dict[str, Any]) -> Iterator[SoftmaxCall]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if last not in ("softmax", "_softmax", "Softmax"):
            continue
        owner = func.value if isinstance(func, ast.Attribute) else None
        keyword = next((k.value for k in node.keywords if k.arg == "dim"), None)
        dim_node: ast.expr | None
        if last == "Softmax":  # nn.Softmax(dim=-1)(scores): the module built inline (ImageGPT), its dim first
            dim_node = keyword if keyword is not None else node.args[0] if node.args else None
        elif keyword is not None:
            dim_node = keyword
        elif owner is None or isinstance(_resolve(owner, scope), types.ModuleType):
            dim_node = node.args[1] if len(node.args) > 1 else None  # softmax(x, dim): a function
        elif isinstance(owner, ast.Name) and owner.id == "self":
            dim_node = None  # self.softmax(x): a callable attribute, its dim unknown here
        else:
            dim_node = node.args[0] if node.args else None  # t.softmax(dim): the Tensor method
        yield SoftmaxCall(ast.unparse(node), _literal(dim_node))


def _literal(node: ast.expr | None) -> int | None:
    """An int literal (-1 included), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        return None if inner is None else -inner
    return None


def _resolve(node: ast.expr, scope: dict[str, Any]) -> Any:
    """The object a name or dotted name refers to in ``scope`` (None where it is not a plain global)."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, scope)
        return getattr(owner, node.attr, None) if isinstance(owner, types.ModuleType) else None
    return None


def _sdpa(tree: ast.AST) -> bool:
    """Whether the code calls scaled_dot_product_attention (P never materialised)."""
    sdpa = "scaled_dot_product_attention"
    return any(
        (isinstance(n, ast.Attribute) and n.attr == sdpa) or (isinstance(n, ast.Name) and n.id == sdpa)
        for n in ast.walk(tree)
    )
