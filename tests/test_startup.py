"""A fast start (issue 33): ``condcli --help``, ``condcli COMMAND --help`` and ``condcli --version`` import
no torch (nor transformers, timm, matplotlib, numpy), and shell completion is switched on. The time itself is
measured by ``bench/bench_startup.py``, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from condcli.cli import app

HEAVY = ("torch", "transformers", "timm", "matplotlib", "numpy")
# said by an exit handler: the process ends without the interpreter's teardown, after its exit handlers
PROBE = """
import atexit, json, sys
heavy = lambda: sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
atexit.register(lambda: sys.__stderr__.write("MODULES " + json.dumps(heavy())))
sys.argv = ["condcli", *json.loads(sys.argv[1])]
from condcli.__main__ import run
run()
"""


def heavy_modules(*args: str) -> list[str]:
    """The heavy packages a whole ``condcli ARGS`` process has imported when it ends."""
    code = f"HEAVY = {HEAVY!r}\n{PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True, timeout=120
    )
    line = done.stderr.rsplit("MODULES ", 1)[-1]
    assert done.stdout, done.stderr  # it printed its help or version
    return list(json.loads(line))


@pytest.mark.parametrize(
    "args",
    [["--help"], ["spectrum", "--help"], ["weights", "--help"], ["--version"]],
)
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    assert heavy_modules(*args) == []


def test_the_cli_modules_import_nothing_heavy() -> None:
    # every command module, imported in a fresh process
    code = (
        "import sys; import condcli.cli;"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_shell_completion_is_switched_on(cli: object) -> None:
    from typer.testing import CliRunner

    text = CliRunner().invoke(app, ["--help"]).stdout
    assert "--install-completion" in text and "--show-completion" in text
