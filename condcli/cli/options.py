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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from condcli.analysis import runs
from condcli.analysis.runs import MAX_SEED as MAX_SEED  # the library's run options, for the commands
from condcli.analysis.runs import RunOptions as RunOptions
from condcli.analysis.runs import RunSetup as RunSetup
from condcli.analysis.runs import Watch
from condcli.analysis.runs import check_seed as check_seed
from condcli.analysis.runs import parse_layers as parse_layers
from condcli.cli.output import path_option

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

MODEL_HELP = (
    "timm name, hf:ID or org/name, a local folder, a sample checkpoint name, or your own code: "
    "path/to/file.py:factory or package.module:factory (a function returning an nn.Module; see --model-arg). "
    "Naming a file or module RUNS ITS CODE: use only code you trust. "
    "Default: \\[tool.condcli] model in ./pyproject.toml, else the shipped sample ViT."
)
ModelArg = Annotated[Optional[str], typer.Argument(help=MODEL_HELP, show_default=False)]


@dataclass(frozen=True)
class Common:
    """One option of the bundle: the RunOptions field it fills, its flag, type, default and help."""

    name: str  # the RunOptions field (and the command's parameter name)
    flag: str  # the command-line flag
    type: Any  # the type typer converts to (Optional[...] where None is a value)
    default: Any
    help: str
    show_default: bool = True


COMMON: tuple[Common, ...] = (
    Common(
        "model_args",
        "--model-arg",
        Optional[list[str]],
        None,
        "key=value, repeatable: a keyword argument of a file.py:factory MODEL. The value is read as a JSON "
        'literal where it is one (4, 1e-3, true, null, [2, 4], "4"), else as the string typed.',
        show_default=False,
    ),
    Common(
        "weights",
        "--weights",
        Optional[str],
        None,
        "pretrained (download or local cache) or random (seeded init). Default: pretrained; random for a "
        "file.py:factory MODEL, whose weights are what the factory builds (condcli fetches nothing for it; "
        "pretrained only labels them so).",
        show_default=False,
    ),
    Common(
        "checkpoint",
        "--checkpoint",
        Optional[Path],
        None,
        "A .safetensors or .pt/.pth state dict for MODEL's architecture.",
    ),
    Common(
        "adapter",
        "--adapter",
        Optional[Path],
        None,
        "A .toml file declaring where X, the blocks, Q/K/V and P are, for a model the generic adapter "
        "cannot read fully; it replaces the family adapter (see the README, 'Your own model').",
    ),
    Common("seed", "--seed", int, 0, f"Seed for random init and synthetic inputs: 0 … {MAX_SEED}."),
    Common("images", "--images", Optional[Path], None, "A folder of images (searched recursively)."),
    Common(
        "text",
        "--text",
        Optional[Path],
        None,
        "A UTF-8 file, one sample per line (- reads standard input); a line is read only as far as the "
        "model's maximum length can use.",
    ),
    Common("max_samples", "--max-samples", Optional[int], None, "Use at most this many samples."),
    Common("batch_size", "--batch-size", int, 8, "Samples per forward pass."),
    Common(
        "lam",
        "--lambda",
        Optional[float],
        None,
        "λ of X + λ·I_k. Default: the model's own λ if it was trained with conditioned tokens, else 10.",
        show_default=False,
    ),
    Common("layers", "--layers", Optional[str], "all", "all, none, or indices such as 0,3,-1."),
    Common("device", "--device", str, "auto", "auto, cpu, cuda or cuda:N."),
    Common(
        "device_map",
        "--device-map",
        Optional[str],
        None,
        "Spread a model too big for one device over the GPUs, the CPU and disk (accelerate): auto"
        " (= balanced), balanced, balanced_low_0 or sequential. The analysis runs on the first GPU used,"
        " else the CPU.",
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
        show_default=False,
    ),
    Common("dtype", "--dtype", Optional[str], None, "Run the model in float32/float64/float16/bfloat16."),
    Common(
        "trust_remote_code",
        "--trust-remote-code",
        bool,
        False,
        "Allow a Hugging Face model to run code from its repository.",
    ),
    Common("as_json", "--json", bool, False, "Print the JSON report on stdout and nothing else there."),
)
COMMON_FLAGS: dict[str, str] = {"model": "MODEL", **{c.name: c.flag for c in COMMON}}
"""Parameter name → what the user types, for every bundled option (e.g. "lam" → "--lambda")."""

F = TypeVar("F", bound=Callable[..., Any])


def _option(c: Common, default: Any, help: str) -> inspect.Parameter:
    info = typer.Option(c.flag, help=help, show_default=c.show_default)
    return inspect.Parameter(
        c.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[c.type, info]
    )


def run_options(
    *,
    model: bool = True,
    defaults: Mapping[str, Any] | None = None,
    help: Mapping[str, str] | None = None,
) -> Callable[[F], F]:
    """Give a command every common option: its first parameter receives one :class:`RunOptions`.

    ``model``: also take the optional MODEL argument (compare declares its own two). ``defaults`` and
    ``help``: per-command overrides by field name, where the command's behaviour differs.
    """
    overrides, helps = dict(defaults or {}), dict(help or {})
    unknown = (set(overrides) | set(helps)) - {f.name for f in fields(RunOptions)}
    if unknown:
        raise TypeError(f"run_options: unknown option(s) {sorted(unknown)}")

    def decorate(fn: F) -> F:
        own = list(inspect.signature(fn, eval_str=True).parameters.values())
        if not own or own[0].name != "run":
            raise TypeError(f"{fn.__name__}: the first parameter must be 'run: RunOptions'")
        names = {c.name for c in COMMON} | ({"model"} if model else set())
        clash = names & {p.name for p in own[1:]}
        if clash:
            raise TypeError(f"{fn.__name__} re-declares common option(s) {sorted(clash)}")
        keyword = inspect.Parameter.KEYWORD_ONLY  # typer passes everything by keyword
        head = [inspect.Parameter("model", keyword, default=None, annotation=ModelArg)] if model else []
        bundled = [_option(c, overrides.get(c.name, c.default), helps.get(c.name, c.help)) for c in COMMON]
        # in --help and on the command line: MODEL (or compare's MODEL_A MODEL_B), then the command's own
        # options, then the bundle's
        params = [*head, *(p.replace(kind=keyword) for p in own[1:]), *bundled]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            given = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            return fn(RunOptions(**given), **kwargs)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate


Json = Annotated[bool, typer.Option("--json", help="Print the JSON report on stdout and nothing else there.")]
Out = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        help="Write report.json, report.html (a self-contained page) and the plots into this folder.",
        parser=path_option,
        metavar="<path>",
    ),
]
Format = Annotated[str, typer.Option("--format", help="Plot format: png, svg or pdf.")]
Csv = Annotated[
    Optional[Path],
    typer.Option(
        "--csv",
        help="Write the report's tables as CSV into this folder: samples, layers, heads, spectrum, … (one "
        "row per observation; the same tables as report.to_pandas() in Python).",
        parser=path_option,
        metavar="<path>",
        show_default=False,
    ),
]


def plot_format(text: str) -> str:
    from condcli.errors import UsageError

    if text not in ("png", "svg", "pdf"):
        raise UsageError(f"--format {text!r} is not known", "use --format png, svg or pdf")
    return text


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
    from condcli.cli.progress import progress_bar

    return Watch(lambda label, expected: progress_bar(label, expected, enabled=progress), input_notes)


def setup_run(run: RunOptions, *, config: Path | None = None) -> RunSetup:
    """:func:`condcli.analysis.runs.setup_run`, watched by the CLI (:func:`watch`)."""
    return runs.setup_run(run, config=config, watch=watch(not run.as_json))
