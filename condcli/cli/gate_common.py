"""What ``condcli check`` and ``condcli compare`` share: the --statistic option and warnings on stderr."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

StatisticOption = Annotated[
    Optional[str],
    typer.Option(
        "--statistic",
        help="Which statistic over samples to use: median (default), mean or max (the worst sample).",
        show_default=False,
    ),
]


def warn(lines: Iterable[str]) -> None:
    """Each line as ``warning: …`` on stderr (also with --json, whose stdout holds only the report)."""
    err = Console(stderr=True, soft_wrap=True)
    for line in lines:
        err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
