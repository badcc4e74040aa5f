"""``python -m condcli``."""

from condcli.cli import run

run()
