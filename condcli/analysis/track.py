"""``condcli track``: the same analysis of every checkpoint of a training run, against the training step.

:func:`discover` turns the folders given (checkpoint folders, or run folders holding ``checkpoint-*``
folders, as an HF Trainer's ``output_dir``) into :class:`Checkpoint` objects sorted by step: the step is
``global_step`` of the checkpoint's ``trainer_state.json`` where it has one, else the digits its folder name
ends with (``checkpoint-500`` → 500). :func:`track` loads one checkpoint at a time (each a local MODEL
folder), runs :func:`condcli.analysis.spectrum.analyse_spectrum` on the same inputs and checks that every
checkpoint has the first one's architecture and read the inputs alike.

The inputs: ``text`` or ``images`` where given; else the training callback's probe batch where the
checkpoints have one (``condcli_probe.safetensors`` in a checkpoint folder or its run folder,
:mod:`condcli.analysis.track_probe`), fed whole as the callback fed it, so each checkpoint's values are the
ones the callback logged at its step; else the model's default inputs.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from condcli.analysis.common import Progress, release_memory, resolve_lambda
from condcli.analysis.proof import prove_first_batch
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import InputSpec, InputStream, stream
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.parsing import read_json
from condcli.reports.spectrum import SpectrumReport
from condcli.reports.track import TrackPoint, TrackReport

STATE = "trainer_state.json"
PREFIX = "checkpoint-"
MAX_STEP_DIGITS = 18  # a step is a count of optimizer steps: more digits is not a step
# config.json entries that fix an architecture (HF and timm layouts); compared before any checkpoint loads
ARCH_KEYS = (
    "model_type",
    "architecture",
    "model_args",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "n_embd",
    "n_layer",
    "n_head",
)
HINT = "give the checkpoint folders of one training run (each holding config.json), or the run folder"

# a progress bar: (label, samples expected or None) → a context giving a callback, or None for no bar
Bar = Callable[[str, "int | None"], AbstractContextManager["Progress | None"]]


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint folder and its training step."""

    path: Path
    step: int
    step_from: str  # "trainer_state.json" | "folder name"


@dataclass(frozen=True)
class TrackOptions:
    lam: float | None = None  # λ of X + λI_k; None: each checkpoint's own, else 10
    layers: Sequence[int] | None = None  # None: all layers; []: none
    seed: int = 0
    probe: bool = True  # no `text`/`images`: the training callback's probe batch, where there is one
    probe_batch_size: int | None = None  # samples per forward on the probe; None: whole, as the callback


def probe_of(checkpoints: Sequence[Checkpoint], spec: InputSpec, options: TrackOptions) -> Path | None:
    """The probe file ``track`` analyses the checkpoints on: None where ``text`` or ``images`` is given,
    ``options.probe`` is off, or no checkpoint has one (:func:`condcli.analysis.track_probe.find_probe`)."""
    from condcli.analysis.track_probe import find_probe

    if not options.probe or spec.text is not None or spec.images is not None:
        return None
    found = find_probe([c.path for c in checkpoints])
    return found[0] if found else None


def _step_of(folder: Path) -> Checkpoint:
    state = folder / STATE
    if state.exists():
        hint = (
            f"{STATE} is written by the HF Trainer: restore it, or remove it to take the step from the name"
        )
        data = read_json(state, str(state), hint)
        step = data.get("global_step") if isinstance(data, dict) else None
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 10**MAX_STEP_DIGITS:
            raise InputError(f"{state} has no global_step (a whole number ≥ 0)", hint)
        return Checkpoint(folder, step, STATE)
    digits = re.search(r"(\d+)$", folder.name)
    if digits is None or len(digits.group(1)) > MAX_STEP_DIGITS:
        raise InputError(
            f"{folder}: the training step is unknown (no {STATE}, and its name does not end in a number)",
            f"name it {PREFIX}STEP, e.g. {PREFIX}500, or add the {STATE} the HF Trainer wrote",
        )
    return Checkpoint(folder, int(digits.group(1)), "folder name")


def _folders(given: Path) -> list[Path]:
    """The checkpoint folders ``given`` stands for: its ``checkpoint-*`` folders, else itself."""
    try:
        if not given.exists():
            raise InputError(f"{given}: no such folder", HINT)
        if not given.is_dir():
            raise InputError(f"{given} is a file, not a checkpoint folder or a run folder", HINT)
        inside = sorted(p for p in given.iterdir() if p.name.startswith(PREFIX) and p.is_dir())
    except OSError as e:
        raise InputError(f"{given} cannot be read ({e.strerror or e})", HINT) from None
    if inside:
        return inside
    if (given / "config.json").is_file():
        return [given]
    raise InputError(f"{given} holds no checkpoint (no config.json, no {PREFIX}* folders)", HINT)


def discover(paths: Sequence[Path]) -> list[Checkpoint]:
    """The checkpoints of ``paths`` (checkpoint folders or run folders), sorted by training step; one
    InputError for a missing path, a file, a folder without checkpoints, an unknown or a repeated step."""
    if not paths:
        raise UsageError("no checkpoint folder given", HINT)
    found = [_step_of(folder) for given in paths for folder in _folders(given)]
    by_step: dict[int, Checkpoint] = {}
    for c in found:
        if c.step in by_step:
            other = by_step[c.step]
            raise InputError(
                f"{other.path} and {c.path} are both step {c.step} "
                f"(from their {other.step_from}, {c.step_from})",
                "give each checkpoint once, from one training run",
            )
        by_step[c.step] = c
    return sorted(found, key=lambda c: c.step)


def _arch_config(folder: Path) -> dict[str, Any] | None:
    """The architecture entries of a folder's config.json; None where it cannot be read (loading says why)."""
    try:
        data = read_json(folder / "config.json", "config.json", "")
    except InputError:
        return None
    return {k: data.get(k) for k in ARCH_KEYS} if isinstance(data, dict) else None


def _differs(first: Checkpoint, other: Checkpoint, what: str) -> InputError:
    return InputError(
        f"{other.path} (step {other.step}) is not the architecture of {first.path} "
        f"(step {first.step}): {what}",
        "track the checkpoints of one model; compare two different models with 'compare'",
    )


def check_configs(checkpoints: Sequence[Checkpoint]) -> None:
    """Before any work: every checkpoint's config.json names the first one's architecture."""
    first = _arch_config(checkpoints[0].path)
    for c in checkpoints[1:]:
        other = _arch_config(c.path)
        if first is None or other is None:
            continue
        for key in ARCH_KEYS:
            if first[key] != other[key]:
                raise _differs(
                    checkpoints[0], c, f"its config.json has {key} {other[key]!r}, not {first[key]!r}"
                )


@dataclass(frozen=True)
class Signature:
    """What makes two loaded models the same architecture: family, layers and every parameter's shape."""

    family: str
    num_layers: int
    shapes: dict[str, tuple[int, ...]]

    @staticmethod
    def of(loaded: LoadedModel) -> Signature:
        shapes = {name: tuple(p.shape) for name, p in loaded.model.named_parameters()}
        return Signature(loaded.family, loaded.num_layers, shapes)

    def difference(self, other: Signature) -> str | None:
        """How ``other`` differs from this one, in a few words; None: the same."""
        if other.family != self.family:
            return f"family {other.family}, not {self.family}"
        if other.num_layers != self.num_layers:
            return f"{other.num_layers} layers, not {self.num_layers}"
        for name in sorted(set(self.shapes) | set(other.shapes)):
            mine, theirs = self.shapes.get(name), other.shapes.get(name)
            if mine != theirs:
                return f"parameter {name} is {_shape(theirs)}, not {_shape(mine)}"
        return None


def _shape(shape: tuple[int, ...] | None) -> str:
    return "absent" if shape is None else "×".join(map(str, shape)) or "a scalar"


def _same_inputs(first: SpectrumReport, report: SpectrumReport) -> str | None:
    a, b = first.inputs, report.inputs
    for what, x, y in (
        ("samples", a.count, b.count),
        ("tokens", a.tokens, b.tokens),
        ("kind", a.kind, b.kind),
    ):
        if x != y:
            return f"{y} {what}, not {x}"
    return None


def _inputs(loaded: LoadedModel, spec: InputSpec, options: TrackOptions, probe: Path | None) -> InputStream:
    if probe is None:
        return stream(loaded.preprocessing, spec)
    from condcli.analysis.track_probe import probe_stream

    return probe_stream(probe, loaded.preprocessing, spec.max_samples, options.probe_batch_size)


def _analyse(
    checkpoint: Checkpoint,
    load_options: LoadOptions,
    spec: InputSpec,
    options: TrackOptions,
    bar: Bar,
    probe: Path | None,
) -> tuple[SpectrumReport, Signature, list[str]]:
    loaded = load(str(checkpoint.path), load_options)
    try:
        lam = resolve_lambda(options.lam, loaded.adapter)
        inputs = _inputs(loaded, spec, options, probe)
        loaded = prove_first_batch(loaded, inputs, options.layers)  # the generic reading, proven first
        chosen = SpectrumOptions(lam=lam, layers=options.layers, conditioned=False, seed=options.seed)
        with bar(f"step {checkpoint.step}", inputs.expected) as advance:
            report = analyse_spectrum(loaded, inputs, chosen, "command line", advance)
        return report, Signature.of(loaded), inputs.notes()
    finally:
        del loaded
        gc.collect()  # one model in memory at a time
        release_memory()


def track(
    checkpoints: Sequence[Checkpoint],
    load_options: LoadOptions,
    spec: InputSpec,
    options: TrackOptions,
    bar: Bar,
    given: Sequence[Path] = (),
) -> tuple[TrackReport, list[str]]:
    """Analyse each checkpoint in step order on the inputs of ``spec`` (without `text` or `images`: the
    training callback's probe batch where the checkpoints have one, :func:`probe_of`); the report and the
    input notes (files skipped, lines cut; each once). Every checkpoint must have the first one's
    architecture. ``given``: the folders as the user named them (the report's model spec), else the
    checkpoints'."""
    check_configs(checkpoints)
    probe = probe_of(checkpoints, spec, options)
    if len(checkpoints) > 1 and spec.text is not None:
        from condcli.inputs.reading import text_source

        if text_source(spec.text).once:
            raise UsageError(
                f"`text={spec.text}` can be read only once, and track reads it once per checkpoint",
                "save the text to a file and give `text=FILE`",
            )
    points: list[TrackPoint] = []
    notes: dict[str, None] = {}
    first: tuple[SpectrumReport, Signature] | None = None
    for c in checkpoints:
        report, signature, input_notes = _analyse(c, load_options, spec, options, bar, probe)
        if first is None:
            first = (report, signature)
        else:
            what = first[1].difference(signature)
            if what is not None:
                raise _differs(checkpoints[0], c, what)
            inputs = _same_inputs(first[0], report)
            if inputs is not None:
                raise InputError(
                    f"{c.path} (step {c.step}) read the inputs differently from "
                    f"{checkpoints[0].path}: {inputs}",
                    "give checkpoints that share one tokenizer / preprocessing",
                )
        notes.update(dict.fromkeys(input_notes))
        points.append(TrackPoint(step=c.step, path=str(c.path), step_from=c.step_from, report=report))
    return TrackReport(tuple(str(p) for p in given or [c.path for c in checkpoints]), tuple(points)), list(
        notes
    )
