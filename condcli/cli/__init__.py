"""The command line: the Typer app, its commands, and ``main``/``run`` (errors → one line + exit code)."""

from condcli.cli import inspect_cmd  # noqa: F401  (registers the command)
from condcli.cli.main import app, main, run

__all__ = ["app", "main", "run"]
