"""``condcli spectrum [MODEL]``: κ(X), κ(X + λI_k), κ(X + C), spectra and per-layer κ and μ, with plots."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from condcli.cli import figure_options as f
from condcli.cli import options as o
from condcli.cli.help_format import ANALYSIS, OUTPUT
from condcli.cli.main import command

Heads = Annotated[
    bool,
    typer.Option(
        "--heads", help="Per-head μ(LA), the actual κ(LA) and μ(A) tables.", rich_help_panel=ANALYSIS
    ),
]
Conditioned = Annotated[
    bool,
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Also run the conditioned forward (X + λ·I_k fed to the blocks) and show its per-layer κ and μ.",
        rich_help_panel=ANALYSIS,
    ),
]

Columns = Annotated[
    Optional[str],  # noqa: UP045  (typer reads the annotation at run time on Python 3.10)
    typer.Option(
        "--columns",
        help="The per-layer table's columns: registry keys, comma-separated (e.g. kappa,mu_la,"
        "conditioned.mu_la). Default: the few that fit 100 columns.",
        rich_help_panel=OUTPUT,
        show_default=False,
    ),
]
Wide = Annotated[
    bool, typer.Option("--wide", help="Every column of the per-layer table.", rich_help_panel=OUTPUT)
]


@command("spectrum")
@o.run_options()
def spectrum_command(
    run: o.RunOptions,
    heads: Heads = False,
    conditioned: Conditioned = True,
    out: o.Out = None,
    csv: o.Csv = None,
    columns: Columns = None,
    wide: Wide = False,
    fmt: o.Format = "png",
    title: f.Title = True,
    style: f.Style = "default",
) -> None:
    """Singular spectra and condition numbers of X and of every layer, plain and conditioned."""
    from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
    from condcli.cli.output import emit, outputs
    from condcli.cli.spectrum_table import parse_columns, render
    from condcli.cli.tables import stdout_console

    chosen = run.layer_choice()
    fmt = o.plot_format(fmt)
    picked = parse_columns(columns, wide)  # before any work: a key that is no column fails now
    files = outputs("spectrum", out, csv, run.input_paths(), fmt)  # before any work
    setup = o.setup_run(run)
    options = SpectrumOptions(
        lam=setup.lam, layers=chosen, heads=heads, conditioned=conditioned, seed=run.seed
    )
    report = setup.analyse("spectrum", analyse_spectrum, options)
    emit(
        report.to_json(),
        files,
        as_json=run.as_json,
        render=lambda: render(stdout_console(), report, picked, wide=wide),
        title=title,
        style=style,
    )
