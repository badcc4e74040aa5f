"""The command line: the Typer app, its commands, and ``main``/``run`` (errors → one line + exit code)."""

import importlib

from condcli.cli.main import app, main, run
from condcli.commands import COMMANDS, cli_module

# each command's module registers it on import, in the registry's order (the order `condcli --help` lists)
for _command in COMMANDS:
    importlib.import_module(cli_module(_command))

__all__ = ["app", "main", "run"]
