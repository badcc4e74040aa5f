"""Every command's terminal output fits the terminal (issue 41): at COLUMNS=80 and 100 no line of stdout is
wider than the terminal (rich's cell width), no table cell is cut ("…" at a cell's end, a row without its
right border), on the shipped samples and on a tiny Llama; footnotes are only for what is shown, and `-q`
prints tables only. (`condcli schema` prints a JSON document, whose description strings cannot be folded
without changing it: it is left out.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from condcli.cli import app
from condcli.loading.samples import samples_dir
from tests.tiny_llm import tiny_llama

WIDTHS = (80, 100)
CUT = re.compile(r"…\s*[│┃]")  # rich's ellipsis at the end of a cell
CLOSES = {"┏": "┓", "┃": "┃", "┡": "┩", "│": "│", "└": "┘"}


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-llama")
    tiny_llama(folder, num_hidden_layers=2)
    return folder


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ViT pair as two checkpoints of one run (steps 1 and 2)."""
    run = tmp_path_factory.mktemp("run")
    (run / "checkpoint-1").symlink_to(samples_dir() / "vit-plain")
    (run / "checkpoint-2").symlink_to(samples_dir() / "vit-conditioned")
    return run


def _commands(llama: Path, run: Path) -> dict[str, list[str]]:
    two = ["--max-samples", "2"]
    rules = ["--max-kappa", "1e9", "--max-mu-la", "1e9", "--max-sink", "0.99"]
    return {
        "spectrum": ["spectrum", "vit-plain", *two],
        "spectrum-llama": ["spectrum", str(llama), "--weights", "random", *two],
        "sweep-lambda": ["sweep-lambda", "vit-plain", *two],
        "rank-decay": ["rank-decay", "vit-plain", "--conditioned", "10", *two],
        "rank-decay-llama": [
            "rank-decay",
            "llama-docstrings",
            "--conditioned",
            "10",
            "--layers",
            "0,-1",
            *two,
        ],
        "check": ["check", "vit-plain", *two, *rules],
        "check-llama": ["check", "llama-docstrings", *two, "--max-kappa", "1e9", "--layers", "0,-1"],
        "compare": ["compare", "vit-plain", "vit-conditioned", *two],
        "track": ["track", str(run), *two],
        "inspect": ["inspect", "vit-plain"],
        "inspect-llama": ["inspect", str(llama), "--weights", "random"],
        "models": ["models"],
        "weights": ["weights", "vit-plain", "--heads"],
        "weights-llama": ["weights", "llama-docstrings", "--heads"],
    }


@pytest.fixture(scope="module")
def printed(llama: Path, run_folder: Path) -> Callable[[str, int], str]:
    """``printed(name, width)``: the command's stdout at COLUMNS=width (run once per pair)."""
    runner, seen, commands = CliRunner(), {}, _commands(llama, run_folder)

    def get(name: str, width: int) -> str:
        if (name, width) not in seen:
            result = runner.invoke(app, commands[name], env={"COLUMNS": str(width)})
            assert result.exit_code in (0, 1), result.output  # 1: a check rule failed, on purpose
            seen[name, width] = result.stdout
        return seen[name, width]

    return get


NAMES = list(_commands(Path("x"), Path("y")))


def _problems(text: str, width: int) -> list[str]:
    found = []
    for line in text.splitlines():
        if cell_len(line) > width:
            found.append(f"{cell_len(line)} cells: {line}")
        body = line.rstrip()
        if body[:1] in CLOSES and not body.endswith(CLOSES[body[:1]]):
            found.append(f"table row without its right border (cropped): {line}")
        if body[:1] in "┃│" and CUT.search(body):
            found.append(f"cut cell: {line}")
    return found


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", NAMES)
def test_every_command_fits_the_terminal(printed: Callable[[str, int], str], name: str, width: int) -> None:
    text = printed(name, width)
    assert text.strip()
    assert _problems(text, width) == []


def test_the_checker_sees_what_rich_does_when_a_table_does_not_fit() -> None:
    """The test's own eye: a plain rich table squeezed below its numbers' width is reported."""
    from rich.console import Console
    from rich.table import Table

    out = Console(width=30, record=True, file=open("/dev/null", "w"))
    table = Table("κ(W_Q^h)κ(W_K^h)κ(W_V^h)", "value", "another value")
    table.add_row("1.2345e+03", "6.789e+10", "VisionTransformer")
    out.print(table)
    assert any("cut cell" in p for p in _problems(out.export_text(), 30))


def test_repeated_text_goes_above_the_table(printed: Callable[[str, int], str]) -> None:
    text = printed("rank-decay", 100)
    assert text.count("softmax over all tokens, n = 65") == 1
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == 6  # one line per layer of the 6-layer ViT


@pytest.mark.parametrize("width", WIDTHS)
def test_footnotes_only_for_what_is_shown(printed: Callable[[str, int], str], width: int) -> None:
    vit = printed("spectrum", width)
    columns = next(line for line in vit.splitlines() if line.startswith("┃ layer"))
    assert "srank" not in columns and "srank" not in vit  # no srank column: no srank note
    assert "GQA" not in vit  # a ViT has no grouped-query attention
    assert ("sink" in columns) == ("sink: attention mass" in vit)
    llama = printed("spectrum-llama", width)
    assert "under GQA" in llama  # the tiny Llama has 2 query heads over 1 KV head


def test_quiet_prints_tables_only(llama: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["spectrum", str(llama), "--weights", "random", "--max-samples", "2", "-q"],
        env={"COLUMNS": "100"},
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines and not any(line.startswith(("note:", "inputs:", "H(P):", "μ(LA) =")) for line in lines)


def test_the_glossary_leaves_out_a_shadow_metric_that_says_nothing_new() -> None:
    """A ViT's rows are distinct: κ_distinct = κ everywhere, so neither its tables nor the page's glossary
    name κ_distinct; a report where they differ keeps it."""
    import json

    from condcli.html.glossary import present

    result = CliRunner().invoke(app, ["spectrum", "vit-plain", "--max-samples", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["embedding"]["kappa_distinct"]["median"] == report["embedding"]["kappa"]["median"]
    keys = [m.key for m in present(report)]
    assert "kappa" in keys and "kappa_distinct" not in keys
    report["embedding"]["kappa_distinct"] = {**report["embedding"]["kappa"], "median": 1.0}
    assert "kappa_distinct" in [m.key for m in present(report)]
