"""The command line: the Typer app, its commands, and ``main``/``run`` (errors → one line + exit code)."""

# registration order is the order `condcli --help` lists the commands in
from condcli.cli import spectrum_cmd, sweep_cmd  # noqa: F401, I001
from condcli.cli import rank_decay_cmd  # noqa: F401
from condcli.cli import check_cmd, compare_cmd  # noqa: F401
from condcli.cli import track_cmd  # noqa: F401
from condcli.cli import inspect_cmd, models_cmd  # noqa: F401
from condcli.cli import report_cmd  # noqa: F401
from condcli.cli import schema_cmd  # noqa: F401
from condcli.cli import weights_cmd  # noqa: F401
from condcli.cli.main import app, main, run

__all__ = ["app", "main", "run"]
