"""The Examples at the end of each command's --help: two or three command lines that run as shown (the
sample checkpoints are names condcli ships; ``tests/test_cli_help.py`` parses every line), declared with each
command in :mod:`condcli.commands`."""

from __future__ import annotations

from condcli.commands import COMMANDS

EXAMPLES: dict[str, tuple[str, ...]] = {c.name: c.examples for c in COMMANDS}
"""Command name → its example command lines."""
