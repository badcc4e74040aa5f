"""Options shared by the commands (SPEC §8), each declared once.

Every command that loads a model and reads inputs takes the same bundle: ``@run_options()`` appends the
bundle's typer parameters (:data:`COMMON`) to the command's own and hands the command one
:class:`RunOptions`; :func:`setup_run` turns that into the loaded model, its λ and its inputs. A command
declares only what is its own (``--heads``, ``--out``, …) and may override a bundle default or help text
where its behaviour differs (e.g. ``check``'s ``--layers``).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer

from condcli.cli.output import path_option
from condcli.inputs import InputSpec
from condcli.sources import LoadOptions

if TYPE_CHECKING:
    from condcli.analysis.common import Progress
    from condcli.inputs import InputStream
    from condcli.sources import LoadedModel

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

MODEL_HELP = (
    "timm name, hf:ID or org/name, a local folder, a sample checkpoint name, or your own code: "
    "path/to/file.py:factory or package.module:factory (a function returning an nn.Module; see --model-arg). "
    "Naming a file or module RUNS ITS CODE: use only code you trust. "
    "Default: \\[tool.condcli] model in ./pyproject.toml, else the shipped sample ViT."
)
ModelArg = Annotated[Optional[str], typer.Argument(help=MODEL_HELP, show_default=False)]
MAX_SEED = 2**32 - 1  # the range torch.manual_seed and NumPy (default_rng, legacy np.random.seed) all take


def check_seed(seed: int) -> int:
    """``seed`` in 0 … 2^32 − 1, the range every seeded library accepts (:class:`UsageError` otherwise)."""
    if not 0 <= seed <= MAX_SEED:
        from condcli.errors import UsageError

        raise UsageError(f"`seed` must be between 0 and {MAX_SEED} (2^32 − 1), got {seed}", "e.g. `seed=0`")
    return seed


@dataclass(frozen=True)
class RunOptions:
    """What every analysis command is told about the model, its inputs and the run (one field per option)."""

    model: str | None = None  # MODEL; None: [tool.condcli] model, else the shipped sample ViT
    model_args: Sequence[str] | None = None  # key=value keyword arguments of a factory MODEL (repeatable)
    weights: str | None = None  # pretrained | random; None: pretrained, random for a factory MODEL
    checkpoint: Path | None = None  # a state dict for MODEL's architecture
    adapter: Path | None = None  # a declared adapter (.toml) for a model the generic path cannot read fully
    seed: int = 0  # random init and synthetic inputs
    images: Path | None = None  # a folder of images
    text: Path | None = None  # a text file, one sample per line
    max_samples: int | None = None  # at most this many samples
    batch_size: int = 8  # samples per forward pass
    lam: float | None = None  # λ of X + λ·I_k; None: the model's own, else 10
    layers: str | None = "all"  # all | none | 0,3,-1 (None: the command decides, e.g. check)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    device_map: str | None = None  # auto | balanced | balanced_low_0 | sequential: spread over devices
    max_memory: str | None = None  # budgets for device_map, e.g. GPU0=20GiB,cpu=60GiB,disk
    dtype: str | None = None  # None: the model's own dtype
    trust_remote_code: bool = False  # let a Hugging Face model run code from its repository
    as_json: bool = False  # the JSON report on stdout and nothing else there

    def __post_init__(self) -> None:
        check_seed(self.seed)  # before any work: torch, NumPy and random would each fail differently later

    def load_options(self) -> LoadOptions:
        """How to load MODEL (``--weights`` checked here)."""
        from condcli.errors import UsageError
        from condcli.sources_factory import parse_model_args

        if self.weights not in (None, "pretrained", "random"):
            raise UsageError(
                f"--weights {self.weights!r} is not known", "use --weights pretrained or --weights random"
            )
        return LoadOptions(
            weights=None if self.weights is None else "random" if self.weights == "random" else "pretrained",
            checkpoint=self.checkpoint,
            seed=self.seed,
            device=self.device,
            device_map=self.device_map,
            max_memory=self.max_memory,
            dtype=self.dtype,
            trust_remote_code=self.trust_remote_code,
            model_args=parse_model_args(self.model_args or ()),
            adapter=self.adapter,
        )

    def input_spec(self) -> InputSpec:
        """What to read (checked here: not both --images and --text, a positive batch size)."""
        from condcli.distributed import check_readable_by_all

        check_readable_by_all(self.text)  # torchrun: standard input cannot be read by every rank
        return InputSpec(
            images=self.images,
            text=self.text,
            max_samples=self.max_samples,
            batch_size=self.batch_size,
            seed=self.seed,
        )

    def layer_choice(self) -> list[int] | None:
        """--layers parsed: None every layer, [] none (an unset --layers counts as all)."""
        return parse_layers("all" if self.layers is None else self.layers)

    def input_paths(self, config: Path | None = None) -> list[tuple[str, Path]]:
        """What this run reads, as (option, path): MODEL's folder or file, --checkpoint, --adapter,
        --images, --text and the config (``config``, else ./pyproject.toml, read even when absent). No
        output may overwrite one of them or be written inside one (:mod:`condcli.outpaths`). A MODEL folder
        of the user's counts as what it holds now, so a report may go beside the model's files (``--out``
        the folder, or a new folder in it) but never over one; a shipped sample's folder is condcli's own."""
        from condcli.errors import CondcliError
        from condcli.project_config import resolve_model
        from condcli.samples import samples_dir
        from condcli.sources import parse_spec

        project = config or Path.cwd() / "pyproject.toml"
        found = [("--config" if config else "the config", project)]
        try:
            spec = parse_spec(resolve_model(self.model, project)[0])
        except CondcliError:
            spec = None  # loading the model says what is wrong with it
        if spec is not None and spec.factory is not None and spec.factory.file is not None:
            found.append(("MODEL", spec.factory.file))
        elif spec is not None and spec.kind == "local":
            folder = Path(spec.target)
            shipped = samples_dir()  # a sample: the folder of every sample, condcli's own data
            if folder.resolve().parent == shipped.resolve():
                found.append(("MODEL", shipped))
            else:  # the user's folder: what is in it now is read (an --out inside may add files beside it)
                found += [("MODEL", entry) for entry in _entries(folder)]
        given = (("--checkpoint", self.checkpoint), ("--adapter", self.adapter), ("--images", self.images))
        found += [(flag, path) for flag, path in (*given, ("--text", self.text)) if path is not None]
        return found


def _entries(folder: Path, most: int = 10_000) -> list[Path]:
    """What a MODEL folder holds now (each file, each subfolder), or the folder itself when it is not a
    folder that can be listed or holds more than ``most`` entries (then nothing may be written inside)."""
    try:
        with os.scandir(folder) as listing:
            entries = [Path(entry.path) for entry in itertools.islice(listing, most + 1)]
    except OSError:
        return [folder]
    return entries if len(entries) <= most else [folder]


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


def parse_layers(text: str) -> list[int] | None:
    """--layers: "all" → None (every layer), "none" → [], "0,3,-1" → [0, 3, -1]."""
    from condcli.errors import UsageError

    value = text.strip().lower()
    if value == "all":
        return None
    if value == "none":
        return []
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise UsageError(
            f"--layers {text!r} is not all, none or a comma-separated list of integers",
            "e.g. --layers 0,3,-1",
        ) from None


def plot_format(text: str) -> str:
    from condcli.errors import UsageError

    if text not in ("png", "svg", "pdf"):
        raise UsageError(f"--format {text!r} is not known", "use --format png, svg or pdf")
    return text


Opts = TypeVar("Opts")
R = TypeVar("R")
Runner = Callable[["LoadedModel", "InputStream", Opts, str, "Progress | None"], R]


@dataclass(frozen=True)
class RunSetup:
    """A loaded model ready to analyse: where MODEL came from, the λ of this run, and what to read."""

    loaded: LoadedModel
    model_from: str  # "command line", "[tool.condcli] model in pyproject.toml", …
    lam: float  # --lambda, else the model's own λ, else 10
    spec: InputSpec
    progress: bool  # show a progress bar (never with --json)

    def inputs(self) -> InputStream:
        """The model's own preprocessing of the inputs (checked here: a missing folder, the wrong kind)."""
        from condcli.inputs import stream

        return stream(self.loaded.preprocessing, self.spec)

    def analyse(self, label: str, runner: Runner[Opts, R], options: Opts) -> R:
        """Run one analysis runner over the inputs, with a progress bar on stderr labelled ``label``."""
        from condcli.analysis.proof import prove_first_batch
        from condcli.cli.progress import progress_bar

        inputs = self.inputs()
        loaded = prove_first_batch(self.loaded, inputs)  # the generic reading, proven before any number
        with progress_bar(label, inputs.expected, enabled=self.progress) as advance:
            result = runner(loaded, inputs, options, self.model_from, advance)
        input_notes(inputs.notes())
        return result


def input_notes(lines: Sequence[str]) -> None:
    """What the run should know about its inputs (files skipped, lines truncated): ``note: …`` on stderr,
    also with --json, whose stdout holds only the report."""
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, soft_wrap=True)
    for line in lines:
        err.print(f"[yellow]note:[/] {escape(line)}", highlight=False)


def setup_run(run: RunOptions, *, config: Path | None = None) -> RunSetup:
    """Check the input options, load MODEL (else ``[tool.condcli] model`` of ``config`` or
    ./pyproject.toml, with its ``model_args``, else the shipped sample ViT) and resolve λ."""
    from dataclasses import replace

    from condcli.analysis.common import resolve_lambda
    from condcli.project_config import configured_model_args, resolve_model
    from condcli.sources import load

    spec = run.input_spec()
    project = config or Path.cwd() / "pyproject.toml"
    spec_text, model_from = resolve_model(run.model, project)
    options = run.load_options()
    configured = configured_model_args(run.model, project)  # --model-arg wins over [tool.condcli] model_args
    if configured:
        options = replace(options, model_args={**configured, **options.model_args})
    loaded = load(spec_text, options)
    lam = resolve_lambda(run.lam, loaded.adapter)
    return RunSetup(loaded, model_from, lam, spec, progress=not run.as_json)
