"""The options of the commands that draw figures (``spectrum``, ``sweep-lambda``, ``rank-decay``, ``track``):
``--title/--no-title`` and ``--style default|paper``, passed on as the plot functions' ``title`` and
``style`` parameters (:mod:`condcli.plots`). Imports neither matplotlib nor condcli.plots, so that
``--help`` stays fast; ``tests/test_plots_paper.py`` checks that :data:`STYLES` is the plots' list."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from condcli.cli.help_format import OUTPUT

STYLES = ("default", "paper")  # condcli.plots.STYLES
FigureStyle = Literal["default", "paper"]

Title = Annotated[
    bool,
    typer.Option(
        "--title/--no-title",
        help="Title each figure with what it shows, the model and the inputs (--no-title: none, for a "
        "paper's caption; the panels of a figure are then tagged (a), (b), …).",
        rich_help_panel=OUTPUT,
    ),
]
Style = Annotated[
    FigureStyle,
    typer.Option(
        "--style",
        help="Figure style: default (screen) or paper (one column of a paper: 3.3 in wide, panels stacked, "
        "8–9 pt type, fonts embedded in PDF).",
        rich_help_panel=OUTPUT,
    ),
]

__all__ = ["STYLES", "FigureStyle", "Style", "Title"]
