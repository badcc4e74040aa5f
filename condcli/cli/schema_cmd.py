"""``condcli schema [COMMAND]``: the JSON Schema of a command's report (of every command's without one)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from condcli.cli.main import command

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

Command = Annotated[
    Optional[str],
    typer.Argument(
        metavar="[COMMAND]",
        help="spectrum, sweep-lambda, rank-decay, check, compare, track or weights. Default: one schema for "
        "every command's report, chosen by its 'command' key.",
        show_default=False,
    ),
]


@command("schema")
def schema_command(name: Command = None) -> None:
    """Print the JSON Schema (draft 2020-12) of a command's --json report."""
    import json

    from condcli.reports.schema import schema_of

    print(json.dumps(schema_of(name), indent=2))
