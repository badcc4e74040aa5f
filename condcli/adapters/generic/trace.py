"""The generic path's trial forward: every module call of one forward pass, in the order they began, with
only the tensors the discovery (:mod:`condcli.adapters.generic.blocks`) reads kept alive."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import Tap
from condcli.adapters.softmax_tap import SoftmaxTap

Tensor = torch.Tensor
RECENT_NORMS = 8  # norm calls held until an attention may read their output (CoaT's parallel block: 3)


@dataclass
class Call:
    """One module call seen by the trace."""

    order: int
    name: str
    module: nn.Module
    inp: Tensor | None  # first tensor input (kept only where the discovery may need it)
    out: Tensor | None = None  # first tensor output (kept only where the discovery may need it)
    others: tuple[Tensor, ...] = ()  # its other tensor inputs (kept with ``inp``)
    fed_by: Call | None = None  # an attention's call: the norm call whose output is its first input
    read: bool = False  # a norm's call: an attention reads its output


@dataclass
class Trace:
    """The module calls of one forward pass, in the order they began."""

    calls: list[Call] = field(default_factory=list)
    softmaxes: dict[int, int] = field(
        default_factory=dict
    )  # attention id → most softmaxes over keys a call ran
    _index: dict[int, list[Call]] = field(default_factory=dict)

    def of(self, module: nn.Module) -> list[Call]:
        """The calls of ``module``, in order (indexed once the forward has run)."""
        if not self._index:
            for c in self.calls:
                self._index.setdefault(id(c.module), []).append(c)
        return self._index.get(id(module), [])


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Tensor]:
    return [v for v in (*args, *kwargs.values()) if isinstance(v, Tensor)]


def is_norm(m: nn.Module) -> bool:
    return "norm" in type(m).__name__.lower()


def run_trace(model: nn.Module, forward: Callable[[], Any], keep: set[int], attns: set[int]) -> Trace:
    """Call ``forward`` with a hook on every module. Tensors are kept only where the discovery reads them:
    the inputs of the modules in ``keep`` (by id), the outputs of every module that ran before the first
    attention in ``attns`` began, and a norm's input and output where an attention reads that output (the
    last few norms are held until then)."""
    trace = Trace()
    stacks: dict[int, list[Call]] = {}
    taps: list[SoftmaxTap] = []  # one per attention call under way: counts the softmaxes over the keys
    started = [False]
    recent: deque[Call] = deque()
    handles = []

    def pre(name: str, m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ts = _tensors(args, kwargs) if id(m) in keep or is_norm(m) else []
        call = Call(len(trace.calls), name, m, ts[0] if ts else None, None, tuple(ts[1:]))
        if id(m) in attns:
            started[0] = True
            tap = SoftmaxTap()
            _watch(tap).__enter__()
            taps.append(tap)
            call.fed_by = next((n for n in recent if n.out is not None and n.out is call.inp), None)
            if call.fed_by is not None:
                call.fed_by.read = True
        trace.calls.append(call)
        stacks.setdefault(id(m), []).append(call)

    def post(m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        call = stacks[id(m)].pop()
        if id(m) in attns:
            tap = taps.pop()
            _watch(tap).__exit__(None, None, None)
            trace.softmaxes[id(m)] = max(trace.softmaxes.get(id(m), 0), tap.count)
        first = out[0] if isinstance(out, tuple | list) and out else out
        if isinstance(first, Tensor) and (is_norm(m) or not started[0]):
            call.out = first
        if is_norm(m):
            recent.append(call)
            if len(recent) > RECENT_NORMS:
                old = recent.popleft()
                if not old.read and started[0]:  # before the first attention every output is kept
                    old.inp = old.out = None

    for name, m in model.named_modules():
        if not name:
            continue
        handles.append(m.register_forward_pre_hook(_bind(pre, name), with_kwargs=True))
        handles.append(m.register_forward_hook(post, with_kwargs=True))
    training = [(m, m.training) for m in model.modules()]
    try:
        model.eval()
        with torch.no_grad():
            forward()
    finally:
        while taps:  # the forward raised inside an attention call: leave its taps, innermost first
            _watch(taps.pop()).__exit__(None, None, None)
        for h in handles:
            h.remove()
        for m, mode in training:
            m.training = mode
    return trace


def _watch(tap: SoftmaxTap) -> Tap:
    """The tap as the typed context manager capture enters (TorchFunctionMode's own methods are untyped)."""
    return tap


def _bind(pre: Callable[..., None], name: str) -> Callable[..., None]:
    return lambda m, args, kwargs: pre(name, m, args, kwargs)
