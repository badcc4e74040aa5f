"""``--quiet`` (``-q``) on every analysis command: no progress bar and no notes on stderr, the table or JSON
on stdout as ever, and an error still one line on stderr."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result
from PIL import Image

ANALYSES = ("spectrum", "sweep-lambda", "rank-decay", "check", "compare", "track", "inspect")


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two images and a file that is none (skipped, with a note)."""
    folder = tmp_path_factory.mktemp("images")
    (folder / "0-broken.png").write_bytes(b"not an image")
    rng = np.random.default_rng(0)
    for i in (1, 2):
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return folder


def run(cli: Callable[..., Result], images: Path, out: Path, *extra: str) -> Result:
    args = ("vit-plain", "--images", str(images), "--max-samples", "2", "--layers", "0", "--out", str(out))
    return cli("spectrum", *args, *extra)


def test_quiet_drops_the_notes_and_the_files_line_and_keeps_the_report(
    cli: Callable[..., Result], images: Path, tmp_path: Path
) -> None:
    loud = run(cli, images, tmp_path / "a", "--json")
    assert loud.exit_code == 0, loud.output
    assert "note:" in loud.stderr and "skipped" in loud.stderr and "wrote " in loud.stderr
    for flag in ("--quiet", "-q"):
        quiet = run(cli, images, tmp_path / flag, "--json", flag)
        assert quiet.exit_code == 0, quiet.output
        assert quiet.stderr == ""
        assert json.loads(quiet.stdout)["command"] == "spectrum"
        assert (tmp_path / flag / "report.json").is_file()
    table = run(cli, images, tmp_path / "t", "-q")
    assert table.exit_code == 0 and table.stderr == "" and "κ(X)" in table.stdout


def test_quiet_leaves_out_the_reports_notes_under_the_tables(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    from tests.tiny_llm import tiny_llama

    tiny_llama(tmp_path / "llama")  # the generic path's notes: how it read the model
    args = ("spectrum", str(tmp_path / "llama"), "--max-samples", "1", "--layers", "0")
    loud, quiet = cli(*args), cli(*args, "-q")
    assert loud.exit_code == quiet.exit_code == 0
    assert "note: loaded as LlamaForCausalLM" in loud.stdout
    assert "note:" not in quiet.stdout and "κ(X)" in quiet.stdout and quiet.stderr == ""


def test_quiet_shows_no_progress_bar(
    cli: Callable[..., Result], images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))  # a bar where there is one
    loud = run(cli, images, tmp_path / "a")
    assert loud.exit_code == 0 and "━" in loud.stderr  # the bar
    quiet = run(cli, images, tmp_path / "b", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_an_error_is_still_one_line(cli: Callable[..., Result], images: Path, tmp_path: Path) -> None:
    result = run(cli, images, tmp_path / "o", "-q", "--layers", "99")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and "--layers" in result.stderr


@pytest.mark.parametrize("name", ANALYSES)
def test_every_analysis_command_takes_quiet(name: str) -> None:
    import typer
    from typer.core import TyperGroup, TyperOption

    from condcli.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    (option,) = [p for p in group.commands[name].params if isinstance(p, TyperOption) and p.name == "quiet"]
    assert option.opts == ["--quiet", "-q"] and option.is_flag and not option.hidden
