"""Command-line interface: one module per command, all registered on :data:`app`."""

from condcli.cli.main import app, main, run

__all__ = ["app", "main", "run"]
