"""Options shared by the commands (docs/math.md#cli), each declared once.

Every command that loads a model and reads inputs takes the same bundle: ``@run_options()`` appends the
bundle's typer parameters (:data:`COMMON`) to the command's own and hands the command one
:class:`~condcli.analysis.runs.RunOptions` (the library's); :func:`setup_run` turns that into the loaded
model, its λ and its inputs, watched with a progress bar. A command
declares only what is its own (``--heads``, ``--out``, …) and may override a bundle default or help text
where its behaviour differs (e.g. ``check``'s ``--layers``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, TypeVar, cast, get_args, get_origin

import typer

from condcli.cli.help_format import ANALYSIS, EXECUTION, INPUTS, MODEL, OUTPUT, PANELS
from condcli.cli.output import path_option

if TYPE_CHECKING:  # the library's run options, for the commands (imported on first use: they import torch)
    from condcli.analysis.runs import RunOptions as RunOptions
    from condcli.analysis.runs import RunSetup as RunSetup
    from condcli.analysis.runs import Watch
    from condcli.analysis.runs import check_seed as check_seed
    from condcli.analysis.runs import parse_layers as parse_layers

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

MAX_SEED = 2**32 - 1  # condcli.analysis.runs.MAX_SEED (tests/test_cli_help.py checks they agree)
_LAZY = ("RunOptions", "RunSetup", "check_seed", "parse_layers")


def __getattr__(name: str) -> Any:
    """The library's run options on first use (``o.RunOptions``): importing them imports torch, which
    --help and --version never need."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from condcli.analysis import runs

    value = getattr(runs, name)
    globals()[name] = value
    return value


MODEL_HELP = (
    "timm name, hf:ID or org/name, a local folder, a sample checkpoint name, or your own code: "
    "path/to/file.py:factory or package.module:factory (a function returning an nn.Module; see --model-arg). "
    "Naming a file or module RUNS ITS CODE: use only code you trust. "
    "Default: \\[tool.condcli] model in ./pyproject.toml, else the shipped sample ViT."
)
ModelArg = Annotated[Optional[str], typer.Argument(metavar="MODEL", help=MODEL_HELP, show_default=False)]
Device = "<auto|cpu|cuda|cuda:N>"  # --device's values: cuda:N is not one fixed choice, so it is a string


@dataclass(frozen=True)
class Common:
    """One option of the bundle: the RunOptions field it fills, its flag, type, default and help."""

    name: str  # the RunOptions field (and the command's parameter name)
    flag: str  # the command-line flag
    type: Any  # the type typer converts to (Optional[...] where None is a value)
    default: Any
    help: str
    panel: str  # the --help panel it is listed in (condcli.cli.help_format.PANELS)
    show_default: bool = True
    metavar: str | None = None


COMMON: tuple[Common, ...] = (
    Common(
        "model_args",
        "--model-arg",
        Optional[list[str]],
        None,
        "key=value, repeatable: a keyword argument of a file.py:factory MODEL. The value is read as a JSON "
        'literal where it is one (4, 1e-3, true, null, [2, 4], "4"), else as the string typed.',
        MODEL,
        show_default=False,
    ),
    Common(
        "weights",
        "--weights",
        Optional[Literal["pretrained", "random"]],
        None,
        "pretrained (download or local cache) or random (seeded init). Default: pretrained; random for a "
        "file.py:factory MODEL, whose weights are what the factory builds (condcli fetches nothing for it; "
        "pretrained only labels them so).",
        MODEL,
        show_default=False,
    ),
    Common(
        "checkpoint",
        "--checkpoint",
        Optional[Path],
        None,
        "A .safetensors or .pt/.pth state dict for MODEL's architecture.",
        MODEL,
    ),
    Common(
        "adapter",
        "--adapter",
        Optional[Path],
        None,
        "A .toml file declaring where X, the blocks, Q/K/V and P are, for a model the generic adapter "
        "cannot read fully; it replaces the family adapter (see the README, 'Your own model').",
        MODEL,
    ),
    Common(
        "trust_remote_code",
        "--trust-remote-code",
        bool,
        False,
        "Allow a Hugging Face model to run code from its repository.",
        MODEL,
    ),
    Common("images", "--images", Optional[Path], None, "A folder of images (searched recursively).", INPUTS),
    Common(
        "text",
        "--text",
        Optional[Path],
        None,
        "A UTF-8 file, one sample per line (- reads standard input); a line is read only as far as the "
        "model's maximum length can use. SAMPLE/FILE that is no file here reads a shipped sample's file, "
        "e.g. llama-docstrings/prompts.txt.",
        INPUTS,
    ),
    Common("max_samples", "--max-samples", Optional[int], None, "Use at most this many samples.", INPUTS),
    Common(
        "lam",
        "--lambda",
        Optional[float],
        None,
        "λ of X + λ·I_k. Default: the model's own λ if it was trained with conditioned tokens, else 10.",
        ANALYSIS,
        show_default=False,
    ),
    Common("layers", "--layers", Optional[str], "all", "all, none, or indices such as 0,3,-1.", ANALYSIS),
    Common(
        "as_json", "--json", bool, False, "Print the JSON report on stdout and nothing else there.", OUTPUT
    ),
    Common(
        "seed", "--seed", int, 0, f"Seed for random init and synthetic inputs: 0 … {MAX_SEED}.", EXECUTION
    ),
    Common("batch_size", "--batch-size", int, 8, "Samples per forward pass.", EXECUTION),
    Common("device", "--device", str, "auto", "auto, cpu, cuda or cuda:N.", EXECUTION, metavar=Device),
    Common(
        "device_map",
        "--device-map",
        Optional[Literal["auto", "balanced", "balanced_low_0", "sequential"]],
        None,
        "Spread a model too big for one device over the GPUs, the CPU and disk (accelerate): auto"
        " (= balanced), balanced, balanced_low_0 or sequential. The analysis runs on the first GPU used,"
        " else the CPU.",
        EXECUTION,
        show_default=False,
    ),
    Common(
        "max_memory",
        "--max-memory",
        Optional[str],
        None,
        "Budgets for --device-map, e.g. GPU0=20GiB,cpu=60GiB,disk (sizes in GiB/GB/MiB/MB or bytes; only the"
        " devices named are used; disk allows offloading the rest to a temporary folder). Default: the free"
        " memory of every GPU and of the CPU, no disk.",
        EXECUTION,
        show_default=False,
    ),
    Common(
        "dtype",
        "--dtype",
        Optional[Literal["float32", "float64", "float16", "bfloat16"]],
        None,
        "Run the model in this dtype. Default: the model's own.",
        EXECUTION,
    ),
)
COMMON_FLAGS: dict[str, str] = {"model": "MODEL", **{c.name: c.flag for c in COMMON}}
"""Parameter name → what the user types, for every bundled option (e.g. "lam" → "--lambda")."""

F = TypeVar("F", bound=Callable[..., Any])


def choice_type(annotation: Any) -> bool:
    """Whether ``annotation`` is a fixed choice (``Literal[...]``, maybe Optional)."""
    origins = [get_origin(annotation), *(get_origin(a) for a in get_args(annotation))]
    return Literal in origins


def as_given(text: str) -> str:
    """The parser of a fixed-choice option: ``--help`` and shell completion list the choices (its
    ``Literal`` type), and the value reaches the library as the string typed, whose one-line error names
    the flag and the choices (``--format 'gif' is not known — use --format png, svg or pdf``)."""
    return text


def _option(c: Common, default: Any, help: str) -> inspect.Parameter:
    info = typer.Option(
        c.flag,
        help=help,
        show_default=c.show_default,
        rich_help_panel=c.panel,
        metavar=c.metavar,
        parser=as_given if choice_type(c.type) else None,
    )
    return inspect.Parameter(
        c.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[c.type, info]
    )


Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No progress bar and no notes on stderr (errors are still one line there; the table or JSON is "
        "printed as ever).",
        rich_help_panel=OUTPUT,
    ),
]


def command_parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """``fn``'s parameters with their annotations evaluated, but for ``run`` (a :class:`RunOptions`,
    named only: evaluating it would import the library, and torch, for --help)."""
    namespace = inspect.unwrap(fn).__globals__
    found = []
    for p in inspect.signature(fn).parameters.values():
        if isinstance(p.annotation, str) and p.name != "run":
            p = p.replace(annotation=eval(p.annotation, namespace))
        found.append(p)
    return found


def run_options(
    *,
    model: bool = True,
    defaults: Mapping[str, Any] | None = None,
    help: Mapping[str, str] | None = None,
    only: Sequence[str] | None = None,
) -> Callable[[F], F]:
    """Give a command every common option and ``--quiet``: its first parameter receives one
    :class:`RunOptions`.

    ``model``: also take the optional MODEL argument (compare declares its own two). ``defaults`` and
    ``help``: per-command overrides by field name, where the command's behaviour differs. ``only``: just
    these options of the bundle (by field name; e.g. ``weights`` reads no inputs). In --help the options
    are grouped by panel (:data:`condcli.cli.help_format.PANELS`), in the panels' order.
    """
    overrides, helps = dict(defaults or {}), dict(help or {})
    taken = [c for c in COMMON if only is None or c.name in only]
    unknown = (set(overrides) | set(helps) | set(only or ())) - {c.name for c in COMMON}
    if unknown:
        raise TypeError(f"run_options: unknown option(s) {sorted(unknown)}")

    def decorate(fn: F) -> F:
        own = command_parameters(fn)
        if not own or own[0].name != "run":
            raise TypeError(f"{fn.__name__}: the first parameter must be 'run: RunOptions'")
        names = {c.name for c in taken} | ({"model"} if model else set())
        clash = (names | {"quiet"}) & {p.name for p in own[1:]}
        if clash:
            raise TypeError(f"{fn.__name__} re-declares common option(s) {sorted(clash)}")
        keyword = inspect.Parameter.KEYWORD_ONLY  # typer passes everything by keyword
        head = [inspect.Parameter("model", keyword, default=None, annotation=ModelArg)] if model else []
        bundled = [_option(c, overrides.get(c.name, c.default), helps.get(c.name, c.help)) for c in taken]
        quiet = inspect.Parameter("quiet", keyword, default=False, annotation=Quiet)
        # on the command line: MODEL (or compare's MODEL_A MODEL_B), the command's own options, the bundle's;
        # in --help, grouped by panel (a stable sort: that order within each panel)
        options = sorted([*(p.replace(kind=keyword) for p in own[1:]), *bundled, quiet], key=_panel_rank)
        params = [*head, *options]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            from condcli.analysis.runs import RunOptions
            from condcli.cli.quiet import quieted

            given = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            with quieted(kwargs.pop("quiet")):
                return fn(RunOptions(**given), **kwargs)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate


def _panel_rank(p: inspect.Parameter) -> int:
    """Where ``p``'s panel comes in --help (an argument, or an option of no panel: first)."""
    info = next((a for a in get_args(p.annotation)[1:] if isinstance(a, typer.models.OptionInfo)), None)
    panel = getattr(info, "rich_help_panel", None)
    return PANELS.index(panel) + 1 if panel in PANELS else 0


Json = Annotated[
    bool,
    typer.Option(
        "--json", help="Print the JSON report on stdout and nothing else there.", rich_help_panel=OUTPUT
    ),
]
Out = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        help="Write report.json, report.html (a self-contained page) and the plots into this folder.",
        parser=path_option,
        metavar="<path>",
        rich_help_panel=OUTPUT,
    ),
]
PlotFormat = Literal["png", "svg", "pdf"]
Format = Annotated[
    PlotFormat, typer.Option("--format", help="Plot format.", parser=as_given, rich_help_panel=OUTPUT)
]
Csv = Annotated[
    Optional[Path],
    typer.Option(
        "--csv",
        help="Write the report's tables as CSV into this folder: samples, layers, heads, spectrum, … (one "
        "row per observation; the same tables as report.to_pandas() in Python).",
        parser=path_option,
        metavar="<path>",
        show_default=False,
        rich_help_panel=OUTPUT,
    ),
]


def plot_format(text: str) -> PlotFormat:
    """``--format``'s value, checked (a one-line error naming the choices)."""
    from condcli.errors import UsageError

    if text not in get_args(PlotFormat):
        raise UsageError(f"--format {text!r} is not known", "use --format png, svg or pdf")
    return cast(PlotFormat, text)  # one of its values: checked above


def input_notes(lines: Sequence[str]) -> None:
    """What the run should know about its inputs (files skipped, lines truncated): ``note: …`` on stderr,
    also with --json, whose stdout holds only the report."""
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, soft_wrap=True)
    for line in lines:
        err.print(f"[yellow]note:[/] {escape(line)}", highlight=False)


def watch(progress: bool) -> Watch:
    """How the CLI watches a run: a progress bar on stderr (``progress``: never with --json) and the
    inputs' notes."""
    from condcli.analysis.runs import Watch
    from condcli.cli.progress import progress_bar

    return Watch(lambda label, expected: progress_bar(label, expected, enabled=progress), input_notes)


def setup_run(run: RunOptions, *, config: Path | None = None) -> RunSetup:
    """:func:`condcli.analysis.runs.setup_run`, watched by the CLI (:func:`watch`)."""
    from condcli.analysis import runs

    return runs.setup_run(run, config=config, watch=watch(not run.as_json))
