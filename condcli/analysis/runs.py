"""A run as a library call: what every analysis is told about the model, its inputs and the run
(:class:`RunOptions`, one field per CLI option), the loaded model ready to analyse (:class:`RunSetup`), and
what the run reads (:meth:`RunOptions.input_paths`: no output may overwrite one of those or be written
inside one, :mod:`condcli.outpaths`).

Errors name the parameters (`layers`, `weights`); the CLI shows its flags instead (:mod:`condcli.errors`).
A caller that wants to watch a run (a progress bar, notes on the inputs) passes a :class:`Watch`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from condcli.errors import InternalError, ParameterTypeError, UsageError, a_type
from condcli.inputs.batches import InputSpec
from condcli.loading.sources import LoadOptions

if TYPE_CHECKING:
    from condcli.analysis.common import Progress
    from condcli.inputs.batches import InputStream
    from condcli.loading.sources import LoadedModel

MAX_SEED = 2**32 - 1  # the range torch.manual_seed and NumPy (default_rng, legacy np.random.seed) all take

Inputs = list[tuple[str, Path]]  # (the parameter, marked: `checkpoint`; the path) of what a run reads


def check_seed(seed: int) -> int:
    """``seed`` in 0 … 2^32 − 1, the range every seeded library accepts (:class:`UsageError` otherwise)."""
    if not 0 <= seed <= MAX_SEED:
        raise UsageError(f"`seed` must be between 0 and {MAX_SEED} (2^32 − 1), got {seed}", "e.g. `seed=0`")
    return seed


# field → (what it must be, a check of the value's type); None is allowed where the default is None
_TYPES: dict[str, tuple[str, Callable[[object], bool]]] = {
    "model": ("a MODEL string", lambda v: isinstance(v, str)),
    "model_args": (
        "a list of key=value strings",
        lambda v: isinstance(v, Sequence) and not isinstance(v, str) and all(isinstance(a, str) for a in v),
    ),
    "weights": ("pretrained or random", lambda v: isinstance(v, str)),
    "checkpoint": ("a path", lambda v: isinstance(v, os.PathLike)),
    "adapter": ("a path", lambda v: isinstance(v, os.PathLike)),
    "seed": ("an integer", lambda v: _integer(v)),
    "images": ("a path", lambda v: isinstance(v, os.PathLike)),
    "text": ("a path", lambda v: isinstance(v, os.PathLike)),
    "max_samples": ("an integer", lambda v: _integer(v)),
    "batch_size": ("an integer", lambda v: _integer(v)),
    "lam": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "layers": ("all, none or indices such as 0,3,-1", lambda v: isinstance(v, str)),
    "device": ("auto, cpu, cuda or cuda:N", lambda v: isinstance(v, str)),
    "device_map": ("auto, balanced, balanced_low_0 or sequential", lambda v: isinstance(v, str)),
    "max_memory": ("budgets such as GPU0=20GiB,cpu=60GiB", lambda v: isinstance(v, str)),
    "dtype": ("float32, float64, float16 or bfloat16", lambda v: isinstance(v, str)),
    "trust_remote_code": ("True or False", lambda v: isinstance(v, bool)),
    "as_json": ("True or False", lambda v: isinstance(v, bool)),
}


def _integer(value: object) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_types(run: RunOptions) -> None:
    """Each field of ``run`` of its type (:class:`ParameterTypeError` naming the parameter otherwise; a path
    given as a string is taken as a path); the values themselves are checked where they are used."""
    for name in ("checkpoint", "adapter", "images", "text"):  # a path given as a string is a path
        if isinstance(getattr(run, name), str):
            object.__setattr__(run, name, Path(getattr(run, name)))
    if isinstance(run.model, os.PathLike):
        object.__setattr__(run, "model", os.fspath(run.model))
    for name, (what, ok) in _TYPES.items():
        value = getattr(run, name)
        # None is "not given" (track's batch_size: the probe batch whole), but where a value is always set
        if value is None and name not in ("seed", "device", "trust_remote_code", "as_json"):
            continue
        if not ok(value):
            raise ParameterTypeError(f"`{name}={value!r}` is {a_type(value)}, not {what}", f"give {what}")


def parse_layers(text: str) -> list[int] | None:
    """``layers``: "all" → None (every layer), "none" → [], "0,3,-1" → [0, 3, -1]."""
    value = text.strip().lower()
    if value == "all":
        return None
    if value == "none":
        return []
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise UsageError(
            f"`layers={text!r}` is not all, none or a comma-separated list of integers",
            "e.g. `layers=0,3,-1`",
        ) from None


@dataclass(frozen=True)
class RunOptions:
    """What every analysis is told about the model, its inputs and the run (one field per CLI option)."""

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
        check_types(self)  # each field as its parameter: `device=5` is one line, not an AttributeError later
        check_seed(self.seed)  # before any work: torch, NumPy and random would each fail differently later
        self.layer_choice()

    def load_options(self) -> LoadOptions:
        """How to load MODEL (``weights`` checked here)."""
        from condcli.loading.factory import parse_model_args

        if self.weights not in (None, "pretrained", "random"):
            raise UsageError(
                f"`weights={self.weights!r}` is not known", "use `weights=pretrained` or `weights=random`"
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
        """What to read (checked here: not both images and text, a positive batch size)."""
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
        """``layers`` parsed: None every layer, [] none (an unset ``layers`` counts as all)."""
        return parse_layers("all" if self.layers is None else self.layers)

    def input_paths(self, config: Path | None = None) -> Inputs:
        """What this run reads, as (parameter, path): MODEL's folder or file, the checkpoint, the adapter,
        the images, the text and the config (``config``, else ./pyproject.toml, read even when absent). No
        output may overwrite one of them or be written inside one (:mod:`condcli.outpaths`). A MODEL folder
        of the user's counts as what it holds now, so a report may go beside the model's files (an output
        folder the folder, or a new folder in it) but never over one; a shipped sample's folder is condcli's
        own."""
        from condcli.errors import CondcliError
        from condcli.loading.project_config import resolve_model
        from condcli.loading.samples import samples_dir
        from condcli.loading.sources import parse_spec

        project = config or Path.cwd() / "pyproject.toml"
        found: Inputs = [("`config`" if config else "the config", project)]
        try:
            spec = parse_spec(resolve_model(self.model, project)[0])
        except CondcliError:
            spec = None  # loading the model says what is wrong with it
        if spec is not None and spec.factory is not None and spec.factory.file is not None:
            found.append(("`model`", spec.factory.file))
        elif spec is not None and spec.kind == "local":
            folder = Path(spec.target)
            shipped = samples_dir()  # a sample: the folder of every sample, condcli's own data
            if folder.resolve().parent == shipped.resolve():
                found.append(("`model`", shipped))
            else:  # the user's folder: what is in it now is read (an output inside may add files beside it)
                found += [("`model`", entry) for entry in _entries(folder)]
        given = {
            "checkpoint": self.checkpoint,
            "adapter": self.adapter,
            "images": self.images,
            "text": self.text,
        }
        found += [(f"`{name}`", path) for name, path in given.items() if path is not None]
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


Opts = TypeVar("Opts")
R = TypeVar("R")
Runner = Callable[["LoadedModel", "InputStream", Opts, str, "Progress | None"], R]


@dataclass(frozen=True)
class Watch:
    """How a caller watches a run: ``progress(label, expected)`` gives a context yielding a callback that
    advances by n samples (or None), ``notes`` receives what the run should know about its inputs (files
    skipped, lines truncated). A library call watches nothing; the CLI draws a bar and prints notes."""

    progress: Callable[[str, int | None], AbstractContextManager[Progress | None]] | None = None
    notes: Callable[[Sequence[str]], None] | None = None


@dataclass(frozen=True)
class RunSetup:
    """A loaded model ready to analyse: where MODEL came from, the λ of this run, and what to read."""

    loaded: LoadedModel
    model_from: str  # "command line", "[tool.condcli] model in pyproject.toml", …
    lam: float  # ``lam``, else the model's own λ, else 10
    spec: InputSpec
    watch: Watch = Watch()

    def inputs(self) -> InputStream:
        """The model's own preprocessing of the inputs (checked here: a missing folder, the wrong kind)."""
        from condcli.inputs.batches import stream

        return stream(self.loaded.preprocessing, self.spec)

    def analyse(self, label: str, runner: Runner[Opts, R], options: Opts) -> R:
        """Run one analysis runner over the inputs (``label``: what a progress bar says).

        The generic reading of the chosen layers is proven on the first batch before any number stands: by
        the runner's own first forward (:mod:`condcli.analysis.proof`); where the proof changed a reading,
        the runner runs again on the model proven."""
        from condcli.analysis.proof import Reread, in_forward, pending

        inputs = self.inputs()
        chosen = getattr(options, "layers", None)  # the layers whose numbers the runner reports
        proof = in_forward(self.loaded, chosen)
        bar = self.watch.progress(label, inputs.expected) if self.watch.progress else nullcontext(None)
        with bar as advance:
            try:
                with pending(proof):
                    result = runner(self.loaded, inputs, options, self.model_from, advance)
            except Reread as again:
                result = runner(again.loaded, inputs, options, self.model_from, advance)
        if proof is not None and not proof.settled and inputs.count:
            raise InternalError(
                f"{label}: the generic reading was never proven", "report it with the command"
            )
        if self.watch.notes is not None:
            self.watch.notes(inputs.notes())
        return result


def setup_run(run: RunOptions, *, config: Path | None = None, watch: Watch | None = None) -> RunSetup:
    """Check the input options, load MODEL (else ``[tool.condcli] model`` of ``config`` or
    ./pyproject.toml, with its ``model_args``, else the shipped sample ViT) and resolve λ."""
    from condcli.analysis.common import resolve_lambda
    from condcli.loading.project_config import configured_model_args, resolve_model
    from condcli.loading.sources import load

    spec = run.input_spec()
    project = config or Path.cwd() / "pyproject.toml"
    spec_text, model_from = resolve_model(run.model, project)
    options = run.load_options()
    configured = configured_model_args(run.model, project)  # model_args given win over [tool.condcli]'s
    if configured:
        options = replace(options, model_args={**configured, **options.model_args})
    loaded = load(spec_text, options)
    lam = resolve_lambda(run.lam, loaded.adapter)
    return RunSetup(loaded, model_from, lam, spec, watch or Watch())
