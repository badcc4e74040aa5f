"""How a figure is set: ``"default"`` (a screen or slide figure, panels side by side) or ``"paper"`` (one
column of a two-column paper: 3.3 in wide, panels stacked, 8–9 pt type, STIX text and mathematics that
match a LaTeX body, TrueType fonts in PDF so the text stays text)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from condcli.errors import UsageError

Style = Literal["default", "paper"]
STYLES: tuple[str, ...] = get_args(Style)

PAPER_WIDTH = 3.3  # in: one column of a two-column paper
PAPER_PANEL_HEIGHT = 1.9  # in: each stacked panel's height, without the legend under it
PAPER_DPI = 300  # a PNG for print: 990 px across the column


@dataclass(frozen=True)
class Look:
    """The sizes a style gives the parts matplotlib's rc does not reach."""

    legend: float | str  # the legend's font size
    note: float | str  # annotations beside reference lines
    cell: float  # the values written into heatmap cells
    legend_below: int  # a legend with more entries than this goes under its panel, not on it
    two_columns: int  # a legend under its panel has two columns where no entry is longer than this
    row: float  # in: the height of one row of a legend under its panel
    under_axis: float  # in: from the bottom of a panel to the top of a legend under it (ticks, x label)
    width: float  # the line widths of the description are multiplied by this
    y_notes: bool  # the names of horizontal reference lines are also written in the plot
    dpi: int  # a PNG's resolution: a screen's, or a printed column's (at least 300)
    title_chars: int  # a panel title longer than this breaks after its first ": " (0: never)
    rc: dict[str, Any]


DEFAULT = Look(
    legend="small",
    note="small",
    cell=6,
    legend_below=4,
    two_columns=30,
    row=0.2,
    under_axis=0.5,
    width=1.0,
    y_notes=True,
    dpi=150,
    title_chars=0,
    rc={"axes.formatter.use_mathtext": True},
)

PAPER = Look(
    legend=8,
    note=8,
    cell=5,
    legend_below=0,
    two_columns=24,
    row=0.15,
    under_axis=0.36,
    width=0.7,
    y_notes=False,
    dpi=PAPER_DPI,
    title_chars=55,
    rc={
        "font.size": 8,
        "axes.titlesize": 9,
        "axes.labelsize": 8,
        "xtick.labelsize": 8,
        "ytick.labelsize": 8,
        "legend.fontsize": 8,
        "figure.titlesize": 9,
        "font.family": "STIXGeneral",
        "mathtext.fontset": "stix",
        "axes.formatter.use_mathtext": True,
        "axes.linewidth": 0.6,
        "lines.linewidth": 1.0,
        "lines.markersize": 3,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "xtick.minor.width": 0.4,
        "ytick.minor.width": 0.4,
        "grid.linewidth": 0.4,
        "legend.frameon": False,
        "legend.handlelength": 1.5,
        "legend.columnspacing": 1.0,
        "legend.handletextpad": 0.4,
        "legend.labelspacing": 0.25,
        "legend.borderaxespad": 0.3,
        "pdf.fonttype": 42,  # TrueType: the PDF's text stays text (searchable, editable)
        "ps.fonttype": 42,
        "savefig.pad_inches": 0.02,
    },
)

LOOKS = {"default": DEFAULT, "paper": PAPER}


def look(style: str) -> Look:
    """The :class:`Look` of ``style``; :class:`UsageError` naming the parameter for any other value."""
    if style not in LOOKS:
        raise UsageError(f"unknown figure style {style!r} for `style`", f"use one of {', '.join(STYLES)}")
    return LOOKS[style]
