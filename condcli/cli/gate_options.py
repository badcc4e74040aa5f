"""``check``'s options: one rule option per gate of the metric registry (--max-kappa, --min-stable-rank, …),
then --baseline, --tolerance, --junit, --config, --conditioned and --out; and ``compare``'s own arguments
and options.

:func:`gate_options` replaces a command's ``limits`` parameter by one typer option per
:data:`condcli.reports.metrics.GATES` entry and hands the command ``limits``: rule name → the limit given, or
None.
A metric declared with a gate in the registry is therefore gateable from the command line and from
``[tool.condcli.check]`` without any change here.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from condcli.cli.help_format import ANALYSIS, MODEL, OUTPUT, RULES
from condcli.cli.options import command_parameters
from condcli.cli.output import path_option
from condcli.reports.metrics import GATES

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

F = TypeVar("F", bound=Callable[..., Any])


def _parameter(rule: str, kind: Any) -> inspect.Parameter:
    info = typer.Option(
        GATES[rule].option, help=GATES[rule].gate_help, show_default=False, rich_help_panel=RULES
    )
    return inspect.Parameter(rule, kind, default=None, annotation=Annotated[Optional[float], info])


def gate_options(fn: F) -> F:
    """Give ``fn`` (which takes ``limits: dict[str, float | None]``) one option per registry gate."""
    own = command_parameters(fn)
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


BaselineOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--baseline",
        help="A report from 'condcli spectrum --json > baseline.json': fail when a metric regresses past "
        "--tolerance (improvements never fail).",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
Tolerance = Annotated[
    Optional[str],
    typer.Option(
        "--tolerance",
        help="Allowed regression against --baseline: a percentage (10%) or a fraction below 1 (0.1). "
        "Default 10%.",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
Junit = Annotated[
    Optional[Path],
    typer.Option(
        "--junit",
        help="Also write JUnit XML here: one testcase per rule and per baseline metric.",
        show_default=False,
        parser=path_option,
        metavar="<path>",
        rich_help_panel=OUTPUT,
    ),
]
Config = Annotated[
    Optional[Path],
    typer.Option(
        "--config",
        help="Read \\[tool.condcli.check] (and \\[tool.condcli] model) from this TOML file instead of "
        "./pyproject.toml. The command line wins over the file, key by key.",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
CheckOut = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        help="Also write the report into this folder: report.json and report.html (a self-contained page).",
        show_default=False,
        parser=path_option,
        metavar="<path>",
        rich_help_panel=OUTPUT,
    ),
]
CheckConditioned = Annotated[
    Optional[bool],
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Run the conditioned forward too. Default: when the baseline has its per-layer numbers.",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
WeightsOnly = Annotated[
    bool,
    typer.Option(
        "--weights-only",
        help="Gate the weights alone (κ(E): --max-kappa-table), as 'condcli weights' reads them: no inputs, "
        "no forward; safetensors folders are read tensor by tensor.",
        rich_help_panel=ANALYSIS,
    ),
]
ModelA = Annotated[
    Optional[str],
    typer.Argument(
        metavar="MODEL_A",
        help="Model A, the reference (any MODEL form, see 'spectrum'), or a saved report FILE.json. Given "
        "alone, the one model is B and A is \\[tool.condcli] model in ./pyproject.toml (else the shipped "
        "sample ViT).",
        show_default=False,
    ),
]
ModelB = Annotated[
    Optional[str],
    typer.Argument(
        metavar="MODEL_B",
        help="Model B, compared against A (ratios are B/A), or a saved report FILE.json.",
        show_default=False,
    ),
]
CheckpointA = Annotated[
    Optional[Path],
    typer.Option(
        "--checkpoint-a",
        help="A state dict for A's architecture (--checkpoint is B's), e.g. two checkpoints of one model.",
        show_default=False,
        rich_help_panel=MODEL,
    ),
]
CompareOut = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        help="Write the report into this folder: report.json and report.html (a self-contained page).",
        show_default=False,
        parser=path_option,
        metavar="<path>",
        rich_help_panel=OUTPUT,
    ),
]
CompareConditioned = Annotated[
    bool,
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Also run each plain model's conditioned forward (X + λ·I_k fed on) and compare it.",
        rich_help_panel=ANALYSIS,
    ),
]
