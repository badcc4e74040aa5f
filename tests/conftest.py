"""Shared fixtures: the Hub unreachable for every test, every report a test writes validated against the
shipped JSON Schema, condcli's CLI run in-process (and its --json report parsed), and a count of the hooks
left on a model."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import Result
from torch import nn
from typer.testing import CliRunner

from condcli.loading import hub


@pytest.fixture(autouse=True, scope="session")
def offline() -> Iterator[None]:
    """Tests never touch the network: the Hub is unreachable, as on CI machines (every test, every scope)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hub, "reachable", lambda: False)
        yield


@pytest.fixture(autouse=True, scope="session")
def reports_match_schema() -> Iterator[None]:
    """Every report a test writes (--json, --out's report.json, report.save()) goes through
    :func:`condcli.writing.report_files.report_json` (the CLI's --json through its name in
    :mod:`condcli.cli.output`): it is validated there against the shipped JSON Schema, so a key added without
    the schema fails the test that wrote it. Each distinct report text is checked once."""
    from condcli.cli import output
    from condcli.reports.schema import problems
    from condcli.writing import report_files

    original = output.report_json
    seen: set[int] = set()

    def checked(report: dict[str, Any]) -> str:
        text = original(report)
        key = hash(text)
        if key not in seen and isinstance(report, dict) and "command" in report:
            found = problems(json.loads(text))
            assert not found, "the report does not match its JSON Schema (condcli schema):\n" + "\n".join(
                found
            )
            seen.add(key)
        return text

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(output, "report_json", checked)
        mp.setattr(report_files, "report_json", checked)
        yield


@pytest.fixture(scope="session")
def cli() -> Callable[..., Result]:
    """``cli("spectrum", "vit-plain", …)``: condcli run in-process by Typer's CliRunner, stderr apart."""
    from condcli.cli import app

    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(app, list(args))

    return invoke


@pytest.fixture(scope="session")
def cli_json(cli: Callable[..., Result]) -> Callable[..., dict[str, Any]]:
    """``cli_json("spectrum", …)``: the command run with --json; asserts exit 0 and returns the report."""

    def run(*args: str) -> dict[str, Any]:
        result = cli(*args, "--json")
        assert result.exit_code == 0, result.output
        report: dict[str, Any] = json.loads(result.stdout)  # stdout holds the JSON and nothing else
        return report

    return run


@pytest.fixture(scope="session")
def hook_count() -> Callable[[nn.Module], int]:
    """``hook_count(model)``: forward hooks and pre-hooks on all of the model's modules (none left = 0)."""
    from tests.recording import hook_count as count

    return count


# Real reports for the HTML tests (tests/html_reports.py), made once per session.
@pytest.fixture(scope="session")
def spectrum(cli_json: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    from tests.html_reports import made, spectrum_args

    return made(cli_json, spectrum_args())


@pytest.fixture(scope="session")
def sweep(cli_json: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    from tests.html_reports import made, sweep_args

    return made(cli_json, sweep_args())


@pytest.fixture(scope="session")
def rank(cli_json: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    from tests.html_reports import made, rank_args

    return made(cli_json, rank_args())
