"""``condcli rank-decay [MODEL]``: Linformer-style rank decay of every layer's attention probabilities P."""

from __future__ import annotations

import functools
from typing import Annotated, Optional

import typer

from condcli.cli import figure_options as f
from condcli.cli import options as o
from condcli.cli.help_format import ANALYSIS
from condcli.cli.main import command

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

Index = Annotated[
    Optional[int],
    typer.Option(
        "--index",
        help="m: read c_m, the share of Σσ in the m largest singular values of P (from 1). "
        "Default: round(n/4) of each layer's n.",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]
Heads = Annotated[
    bool,
    typer.Option("--heads", help="Also print c_m, rank 90% and erank per head.", rich_help_panel=ANALYSIS),
]
ConditionedLambda = Annotated[
    Optional[float],
    typer.Option(
        "--conditioned",
        metavar="λ",
        help="Also run the forward with X + λ·I_k fed to the blocks and show its rank decay side by side.",
        show_default=False,
        rich_help_panel=ANALYSIS,
    ),
]


@command("rank-decay")
@o.run_options()
def rank_decay_command(
    run: o.RunOptions,
    index: Index = None,
    heads: Heads = False,
    conditioned: ConditionedLambda = None,
    out: o.Out = None,
    csv: o.Csv = None,
    fmt: o.Format = "png",
    title: f.Title = True,
    style: f.Style = "default",
) -> None:
    """Singular values and normalized cumulative spectra of P per layer, head and sample, with charts."""
    from condcli.analysis.rank_decay import RankDecayOptions, analyse_rank_decay
    from condcli.cli.output import emit, outputs
    from condcli.cli.rank_table import render
    from condcli.cli.tables import stdout_console

    run = RankDecayOptions.check_run(run, index, conditioned)  # the options, checked before any work
    fmt = o.plot_format(fmt)
    files = outputs("rank-decay", out, csv, run.input_paths(), fmt)  # before any work
    setup = o.setup_run(run)
    options = RankDecayOptions.of(run, setup.lam, index, conditioned, heads)
    report = setup.analyse("rank-decay", analyse_rank_decay, options)
    table = functools.partial(render, stdout_console(), report)
    emit(report.to_json(), files, as_json=run.as_json, render=table, title=title, style=style)
