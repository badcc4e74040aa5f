"""``condcli track CHECKPOINT_DIR...``: κ(X), per-layer κ(X_l), μ(LA) and H(P) against the training step."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args

import typer

from condcli.cli import figure_options as f
from condcli.cli import options as o
from condcli.cli.main import command

Checkpoints = Annotated[
    list[Path],
    typer.Argument(
        metavar="CHECKPOINT_DIR",
        help="Checkpoint folders of one training run (each a local MODEL folder, HF layout), or a run folder "
        "holding checkpoint-* folders (an HF Trainer's output_dir). The step is global_step of each "
        "checkpoint's trainer_state.json, else the number its folder name ends with.",
        show_default=False,
    ),
]
# options of the bundle that choose other weights: track analyses each checkpoint's own saved weights. They
# are hidden (not in --help) and refused with a line that says why (not click's bare "no such option")
NOT_FOR_TRACK = {"checkpoint": "--checkpoint", "model_args": "--model-arg", "weights": "--weights"}
OWN_WEIGHTS = "each checkpoint is analysed with its own saved weights"
HELP = {
    "batch_size": "Samples per forward pass. Default: 8; the callback's probe batch whole, as the callback "
    "fed it.",
}

F = TypeVar("F", bound=Callable[..., Any])


def _hidden(names: Iterable[str]) -> Callable[[F], F]:
    """Hide bundle options ``names`` of a ``run_options`` command from its --help (typer still parses them,
    so the command can refuse them with its own line)."""

    def decorate(fn: F) -> F:
        for param in inspect.signature(fn).parameters.values():
            if param.name in names:
                info = next(
                    a for a in get_args(param.annotation)[1:] if isinstance(a, typer.models.OptionInfo)
                )
                info.hidden = True  # this command's own OptionInfo: run_options makes one per command
        return fn

    return decorate


def _refuse_model_options(run: o.RunOptions) -> None:
    """track analyses each checkpoint's own saved weights: options choosing other weights are refused."""
    from condcli.errors import UsageError

    for field, flag in NOT_FOR_TRACK.items():
        value = getattr(run, field)
        if value and not (field == "weights" and value == "pretrained"):
            raise UsageError(f"{flag} does not apply to track: {OWN_WEIGHTS}", f"leave out {flag}")


@command("track")
@_hidden(NOT_FOR_TRACK)
@o.run_options(model=False, defaults={"batch_size": None}, help=HELP)
def track_command(
    run: o.RunOptions,
    checkpoints: Checkpoints,
    out: o.Out = None,
    fmt: o.Format = "png",
    csv: o.Csv = None,
    title: f.Title = True,
    style: f.Style = "default",
) -> None:
    """κ(X), per-layer κ(X_l), μ(LA) and attention entropy H(P) of each checkpoint against the training step.

    Every checkpoint is analysed with its own saved weights on the same inputs, one model in memory at a
    time.

    Without --text or --images: the training callback's probe batch (condcli_probe.safetensors beside the
    checkpoints) where there is one, so the numbers are the ones the callback logged; else the model's
    default inputs.
    """
    from dataclasses import replace

    from condcli.analysis.track import TrackOptions, discover, probe_of, track
    from condcli.cli.output import emit, outputs
    from condcli.cli.progress import progress_bar
    from condcli.cli.tables import stdout_console
    from condcli.cli.track_table import render

    _refuse_model_options(run)
    given_batch: int | None = run.batch_size  # None: not given (the probe is fed whole)
    run = replace(run, batch_size=8 if given_batch is None else given_batch)
    fmt = o.plot_format(fmt)
    chosen = run.layer_choice()
    spec = run.input_spec()
    found = discover(checkpoints)
    options = TrackOptions(lam=run.lam, layers=chosen, seed=run.seed, probe_batch_size=given_batch)
    probe = probe_of(found, spec, options)
    reads = [entry for c in found for entry in replace(run, model=str(c.path)).input_paths()]
    reads += [("the probe batch", probe)] if probe is not None else []
    files = outputs("track", out, csv, reads, fmt)  # before any work

    def bar(label: str, total: int | None) -> AbstractContextManager[Callable[[int], None] | None]:
        return progress_bar(label, total, enabled=not run.as_json)

    report, notes = track(found, run.load_options(), spec, options, bar, given=checkpoints)
    o.input_notes(notes)
    table = functools.partial(render, stdout_console(), report)
    emit(report.to_json(), files, as_json=run.as_json, render=table, title=title, style=style)
