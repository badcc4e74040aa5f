"""``condcli track CHECKPOINT_DIR...``: κ(X), per-layer κ(X_l), μ(LA) and H(P) against the training step."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

import typer

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
OWN_WEIGHTS = "each checkpoint is analysed with its own saved weights"
NOT_FOR_TRACK = {
    "checkpoint": "--checkpoint",
    "model_args": "--model-arg",
    "weights": "--weights",
}


def _refuse_model_options(run: o.RunOptions) -> None:
    """track analyses each checkpoint's own saved weights: options choosing other weights are refused."""
    from condcli.errors import UsageError

    for field, flag in NOT_FOR_TRACK.items():
        value = getattr(run, field)
        if value and not (field == "weights" and value == "pretrained"):
            raise UsageError(
                f"{flag} does not apply to track: {OWN_WEIGHTS}",
                f"leave out {flag}",
            )


@command("track")
@o.run_options(
    model=False,
    help={field: f"Refused by track: {OWN_WEIGHTS}." for field in NOT_FOR_TRACK},
)
def track_command(
    run: o.RunOptions,
    checkpoints: Checkpoints,
    out: o.Out = None,
    fmt: o.Format = "png",
) -> None:
    """κ(X), per-layer κ(X_l), μ(LA) and attention entropy H(P) of each checkpoint against the training step.

    Every checkpoint is analysed on the same inputs, one model in memory at a time, e.g.
    condcli track runs/bert/ --text probe.txt --layers 0,-1.
    """
    from dataclasses import replace

    from condcli.analysis.track import TrackOptions, discover, track
    from condcli.cli.output import REPORT_FILES, OutputDir, emit
    from condcli.cli.progress import progress_bar
    from condcli.cli.tables import stdout_console
    from condcli.cli.track_table import render

    _refuse_model_options(run)
    fmt = o.plot_format(fmt)
    chosen = run.layer_choice()
    found = discover(checkpoints)
    names = (*REPORT_FILES, f"track.{fmt}")
    reads = [entry for c in found for entry in replace(run, model=str(c.path)).input_paths()]
    target = OutputDir(out, names, reads) if out is not None else None  # before any work
    options = TrackOptions(lam=run.lam, layers=chosen, seed=run.seed)

    def bar(label: str, total: int | None) -> AbstractContextManager[Callable[[int], None] | None]:
        return progress_bar(label, total, enabled=not run.as_json)

    report, notes = track(found, run.load_options(), run.input_spec(), options, bar, given=checkpoints)
    o.input_notes(notes)
    data = report.to_json()

    def plots(folder: Path) -> list[Path]:
        from condcli.plots.track import track_plots

        return track_plots(data, folder, fmt)

    emit(data, target, plots, as_json=run.as_json, render=lambda: render(stdout_console(), report))
