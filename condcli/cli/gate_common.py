"""What ``condcli check`` and ``condcli compare`` share: the --statistic option, warnings on stderr, and
check's --out folder."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from condcli.cli.help_format import ANALYSIS
from condcli.cli.options import as_given

if TYPE_CHECKING:
    from condcli.outpaths import Inputs
    from condcli.writing.report_files import Outputs

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

Statistic = Literal["median", "mean", "max"]  # condcli.gate's statistics (tests/test_cli_help.py)
StatisticOption = Annotated[
    Optional[Statistic],
    typer.Option(
        "--statistic",
        help="Which statistic over samples to use: median (default), mean or max (the worst sample).",
        show_default=False,
        parser=as_given,
        rich_help_panel=ANALYSIS,
    ),
]


def warn(lines: Iterable[str]) -> None:
    """Each line as ``warning: …`` on stderr (also with --json, whose stdout holds only the report)."""
    import os

    from rich.console import Console
    from rich.markup import escape

    from condcli.cli.tables import wrapped

    err = Console(stderr=True)
    fold = err.is_terminal or os.environ.get("COLUMNS", "").isdigit()  # a log file keeps one line each
    for line in lines:
        first, *rest = wrapped(line, err.width, "warning: ") if fold else [line]
        err.print(f"[yellow]warning:[/] {escape(first)}", highlight=False, soft_wrap=True)
        for more in rest:
            err.print(escape(more), highlight=False, soft_wrap=True)


def out_dir(out: Path | None, csv: Path | None, read: Inputs, junit: Path | None) -> Outputs:
    """check's --out and --csv folders, checked before any work: never over what the run reads, nor the
    --junit file."""
    from condcli.cli.output import outputs
    from condcli.errors import UsageError
    from condcli.outpaths import clash, shown

    files = outputs("check", out, csv, read)
    if junit is not None:
        for folder in files.folders:
            for name in folder.names:
                if clash(folder.path / name, [("--junit", junit)]):
                    raise UsageError(
                        f"--junit {shown(junit)} is {name} of {folder.what}",
                        "give --junit a path outside that folder, or another name",
                    )
    return files
