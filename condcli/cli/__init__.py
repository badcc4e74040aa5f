"""The command line: the Typer app, its commands, and ``main``/``run`` (errors → one line + exit code)."""

from condcli.cli import inspect_cmd, models_cmd, spectrum_cmd, sweep_cmd  # noqa: F401  (register the commands)
from condcli.cli.main import app, main, run

__all__ = ["app", "main", "run"]
