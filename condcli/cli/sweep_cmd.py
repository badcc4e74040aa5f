"""``condcli sweep-lambda [MODEL]``: κ(X + λI_k) over a λ grid, its bounds, and the λ that meets a target."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from condcli.cli import options as o
from condcli.cli.main import command

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

Range = Annotated[
    Optional[tuple[float, float]],
    typer.Option(
        "--range",
        help="Sweep λ from LO to HI inclusive (--steps points). Default: the paper's grid 1…20.",
        metavar="LO HI",
        show_default=False,
    ),
]
Steps = Annotated[
    Optional[int],
    typer.Option(
        "--steps",
        help="Points in --range, linearly spaced, ends included (20 unless given).",
        show_default=False,
    ),
]
Lambdas = Annotated[
    Optional[str],
    typer.Option("--lambdas", help="An explicit grid instead of --range, e.g. 1,2,5,10.", show_default=False),
]
TargetKappa = Annotated[
    float,
    typer.Option("--target-kappa", help="Recommend the smallest λ whose median κ(X + λ·I_k) is ≤ this."),
]
SweepLayers = Annotated[
    str,
    typer.Option(
        "--layers",
        help="Also follow κ(X_l) of these layers in the conditioned forward at each λ: all, none, or 0,3,-1.",
    ),
]


def parse_lambdas(text: str) -> list[float]:
    """--lambdas "1,2,5,10" → [1.0, 2.0, 5.0, 10.0] (values are checked by lambda_grid)."""
    from condcli.errors import UsageError

    parts = [p.strip() for p in text.split(",")]
    try:
        if not all(parts):
            raise ValueError
        return [float(p) for p in parts]
    except ValueError:
        raise UsageError(
            f"--lambdas {text!r} is not a comma-separated list of numbers", "e.g. --lambdas 1,2,5,10"
        ) from None


@command("sweep-lambda")
def sweep_command(
    model: o.ModelArg = None,
    value_range: Range = None,
    steps: Steps = None,
    lambdas: Lambdas = None,
    target_kappa: TargetKappa = 2.0,
    layers: SweepLayers = "none",
    weights: o.Weights = "pretrained",
    checkpoint: o.Checkpoint = None,
    seed: o.Seed = 0,
    images: o.Images = None,
    text: o.Text = None,
    max_samples: o.MaxSamples = None,
    batch_size: o.BatchSize = 8,
    device: o.Device = "auto",
    dtype: o.Dtype = None,
    trust_remote_code: o.TrustRemoteCode = False,
    as_json: o.Json = False,
    out: o.Out = None,
    fmt: o.Format = "png",
) -> None:
    """κ(X + λ·I_k) over a grid of λ: median and p10–p90 over samples, bounds, and the recommended λ."""
    from condcli.analysis.sweep import SweepOptions, analyse_sweep, check_target, lambda_grid, sweep_layers
    from condcli.cli.output import OutputDir, emit
    from condcli.cli.progress import progress_bar
    from condcli.cli.sweep_table import render
    from condcli.cli.tables import stdout_console
    from condcli.inputs import stream
    from condcli.project_config import resolve_model
    from condcli.sources import load

    given = parse_lambdas(lambdas) if lambdas is not None else None
    grid = lambda_grid(value_range, steps, given)
    target_value = check_target(target_kappa)
    chosen = o.parse_layers(layers)
    fmt = o.plot_format(fmt)
    target = OutputDir(out) if out is not None else None  # checked before any work
    spec = o.input_spec(images, text, max_samples, batch_size, seed)
    spec_text, model_from = resolve_model(model, Path.cwd() / "pyproject.toml")
    loaded = load(spec_text, o.load_options(weights, checkpoint, seed, device, dtype, trust_remote_code))
    chosen = sweep_layers(loaded, chosen)  # out of range / builtin conditioning: before any forward pass
    inputs = stream(loaded.preprocessing, spec)
    options = SweepOptions(lambdas=grid, target_kappa=target_value, layers=chosen, seed=seed)
    with progress_bar("sweep-lambda", inputs.expected, enabled=not as_json) as advance:
        report = analyse_sweep(loaded, inputs, options, model_from, advance)
    data = report.to_json()

    def plots(folder: Path) -> list[Path]:
        from condcli.plots import sweep_plots

        return sweep_plots(data, folder, fmt)

    emit(data, target, plots, as_json=as_json, render=lambda: render(stdout_console(), report))
