"""The command registry (condcli/commands.py) names real things, and the tables that used to be keyed by
command each read it (issue 40: command names were keys in six separate tables)."""

from __future__ import annotations

import importlib

import pytest

from condcli.commands import BY_NAME, COMMANDS, REPORTING, CommandDef


def _cli_commands() -> list[str]:
    import typer.main

    from condcli.cli import app

    return [str(c.name) for c in typer.main.get_command(app).commands.values()]  # type: ignore[attr-defined]


def test_every_cli_command_is_declared_once_in_help_order() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    assert names == _cli_commands()


@pytest.mark.parametrize("c", REPORTING, ids=lambda c: c.name)
def test_a_reporting_command_names_what_exists(c: CommandDef) -> None:
    from condcli.reports.schema import _defs
    from condcli.reports.views import ReportViews

    assert c.report is not None and c.sections is not None and c.table is not None and c.schema is not None
    module, _, cls = c.report.partition(":")
    assert issubclass(getattr(importlib.import_module(module), cls), ReportViews)
    assert callable(importlib.import_module(c.sections).sections)
    assert callable(importlib.import_module(c.table).render)
    for _, builder in c.figures:
        module, _, name = builder.partition(":")
        assert callable(getattr(importlib.import_module(module), name))
    assert c.schema in _defs()
    if c.api is not None:
        import condcli.api

        assert callable(getattr(condcli.api, c.api))


def test_the_command_keyed_tables_read_the_registry() -> None:
    import condcli
    from condcli.cli.examples import EXAMPLES
    from condcli.html import SECTIONS
    from condcli.reports.frames import CSV_NAMES
    from condcli.reports.schema import COMMANDS as SCHEMA_COMMANDS
    from condcli.writing.report_files import PLOT_NAMES

    assert SECTIONS == {c.name: c.sections for c in REPORTING}
    assert SCHEMA_COMMANDS == tuple(c.name for c in REPORTING)
    assert EXAMPLES == {c.name: c.examples for c in COMMANDS}
    assert PLOT_NAMES == {c.name: c.plots for c in COMMANDS if c.plots}
    assert set(CSV_NAMES) == {f"{t}.csv" for c in COMMANDS for t in c.csv}
    for c in COMMANDS:
        if c.api is not None:
            assert c.api in condcli.__all__
    assert BY_NAME["weights"].plots == ("embedding_table",)
