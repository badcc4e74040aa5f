"""``check``'s rule options, one per gate of the metric registry (--max-kappa, --min-stable-rank, …).

:func:`gate_options` replaces a command's ``limits`` parameter by one typer option per
:data:`condcli.metrics.GATES` entry and hands the command ``limits``: rule name → the limit given, or None.
A metric declared with a gate in the registry is therefore gateable from the command line and from
``[tool.condcli.check]`` without any change here.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, Optional, TypeVar

import typer

from condcli.metrics import GATES

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

F = TypeVar("F", bound=Callable[..., Any])


def _parameter(rule: str, kind: Any) -> inspect.Parameter:
    info = typer.Option(GATES[rule].option, help=GATES[rule].gate_help, show_default=False)
    return inspect.Parameter(rule, kind, default=None, annotation=Annotated[Optional[float], info])


def gate_options(fn: F) -> F:
    """Give ``fn`` (which takes ``limits: dict[str, float | None]``) one option per registry gate."""
    own = list(inspect.signature(fn, eval_str=True).parameters.values())
    at = next((i for i, p in enumerate(own) if p.name == "limits"), None)
    if at is None:
        raise TypeError(f"{fn.__name__}: gate_options needs a 'limits' parameter")
    params = [*own[:at], *(_parameter(rule, own[at].kind) for rule in GATES), *own[at + 1 :]]

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        limits = {rule: kwargs.pop(rule, None) for rule in GATES}
        return fn(*args, limits=limits, **kwargs)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command  # type: ignore[return-value]
