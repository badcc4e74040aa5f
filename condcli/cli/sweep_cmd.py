"""``condcli sweep-lambda [MODEL]``: κ(X + λI_k) over a λ grid, its bounds, and the λ that meets a target."""

from __future__ import annotations

import functools
from typing import Annotated, Optional

import typer

from condcli.cli import figure_options as f
from condcli.cli import options as o
from condcli.cli.help_format import ANALYSIS
from condcli.cli.main import command

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

Range = Annotated[
    Optional[tuple[float, float]],
    typer.Option(
        "--range",
        help="Sweep λ from LO to HI inclusive (--steps points). Default: the paper's grid 1…20.",
        metavar="LO HI",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
Steps = Annotated[
    Optional[int],
    typer.Option(
        "--steps",
        help="Points in --range, linearly spaced, ends included (20 unless given; at most 1000).",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
Lambdas = Annotated[
    Optional[str],
    typer.Option(
        "--lambdas",
        help="An explicit grid instead of --range, e.g. 1,2,5,10 (at most 1000 values).",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
TargetKappa = Annotated[
    float,
    typer.Option(
        "--target-kappa",
        help="Recommend the smallest λ whose median κ(X + λ·I_k) is ≤ this.",
        rich_help_panel=ANALYSIS,
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
@o.run_options(
    defaults={"layers": "none"},
    help={
        "layers": "Also follow κ(X_l) of these layers in the conditioned forward at each λ: all, none, "
        "or 0,3,-1.",
        "lam": "λ of the single-λ κ(X + λ·I_k) in the report's embedding section (the sweep itself runs "
        "over --range/--lambdas). Default: the model's own λ if it was trained with conditioned tokens, "
        "else 10.",
    },
)
def sweep_command(
    run: o.RunOptions,
    value_range: Range = None,
    steps: Steps = None,
    lambdas: Lambdas = None,
    target_kappa: TargetKappa = 2.0,
    out: o.Out = None,
    csv: o.Csv = None,
    fmt: o.Format = "png",
    title: f.Title = True,
    style: f.Style = "default",
) -> None:
    """κ(X + λ·I_k) over a grid of λ: median and p10–p90 over samples, bounds, and the recommended λ."""
    from dataclasses import replace

    from condcli.analysis.sweep import SweepOptions, analyse_sweep, sweep_layers
    from condcli.cli.output import emit, outputs
    from condcli.cli.sweep_table import render
    from condcli.cli.tables import stdout_console

    given = parse_lambdas(lambdas) if lambdas is not None else None
    asked = SweepOptions.asked(value_range, steps, given, target_kappa, run.layer_choice(), run.seed)
    fmt = o.plot_format(fmt)
    files = outputs("sweep-lambda", out, csv, run.input_paths(), fmt)  # before any work
    setup = o.setup_run(run)
    # layers out of range, or a model that conditions its own X: before any forward pass
    options = replace(asked, layers=sweep_layers(setup.loaded, asked.layers), lam=setup.lam)
    report = setup.analyse("sweep-lambda", analyse_sweep, options)
    table = functools.partial(render, stdout_console(), report)
    emit(report.to_json(), files, as_json=run.as_json, render=table, title=title, style=style)
