"""The README opens with the two set-up commands, then what condcli is for with a real plot, and the table
`make demo` prints; it stays a start (≤ 300 lines) whose links to docs/ resolve."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from docs.regenerate import TERMINAL
from tests.claims import assert_same_at_claimed_precision

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_first_lines_are_the_two_set_up_commands() -> None:
    lines = README.splitlines()
    assert lines[0] == "# condcli"
    assert lines[2] == "```bash" and lines[5] == "```"
    assert lines[3].startswith("make demo ") and lines[4].startswith("make test ")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = r"^demo: \$\(STAMP\)\n(#.*\n)*\t\$\(BIN\)/condcli spectrum --out demo-output$"
    assert re.search(recipe, makefile, re.M)


def test_readme_table_is_what_make_demo_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(ROOT)  # make demo runs in the repository root (its pyproject.toml names no model)
    for name, value in TERMINAL.items():  # the page shows a 100-column terminal, as every docs block
        monkeypatch.setenv(name, value)
    result = cli("spectrum", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    block = re.search(r"<!-- demo:begin -->\n```text\n(.*?)\n```\n<!-- demo:end -->", README, re.S)
    assert block is not None, "the README lost its demo table"
    printed = "\n".join(line.rstrip() for line in result.stdout.rstrip("\n").splitlines())
    assert_same_at_claimed_precision(block.group(1), printed)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".condcli-manifest.json",
        "layers.png",
        "report.html",
        "report.json",
        "spectrum.png",
    ]


@pytest.mark.parametrize(
    ("readme", "printed", "same"),
    [
        ("│ 151    │", "│ 152    │", True),  # a rounding boundary: one unit of the last digit
        ("│ 151    │", "│ 154    │", False),
        ("│ ≈9e+09 ⚠ │", "│ ≈8e+09 ⚠ │", True),
        ("│ ≈9e+09 ⚠ │", "│ ≈6e+09 ⚠ │", False),
        ("│ ≈1e+07 ⚠ │", "│ ≥ 1.7e+07 ⚠ │", True),  # [0, 2e7] meets [1.6e7, ∞): a sample became a floor
        ("│ ≈1e+07 ⚠ │", "│ ≥ 2.7e+07 ⚠ │", False),
        ("│ 1.45e+03 │", "│ 1.46e+03 │", True),
        ("│ 0 blocks.0 │", "│ 1 blocks.0 │", False),
    ],
)
def test_claimed_precision_comparison(readme: str, printed: str, same: bool) -> None:
    if same:
        assert_same_at_claimed_precision(readme, printed)
    else:
        with pytest.raises(AssertionError):
            assert_same_at_claimed_precision(readme, printed)


def test_readme_plot_is_a_real_demo_plot() -> None:
    image = ROOT / "docs" / "demo-spectrum.png"
    assert "](docs/demo-spectrum.png)" in README.split("<!-- demo:begin -->")[0]
    data = image.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_shaped_attention_comparison_cites_the_demo_table() -> None:
    """The vanilla ViT's κ(P) and μ(A) quoted beside the blog model (docs/guides/your-own-model.md) are the
    demo run's (checked above)."""
    guide = (ROOT / "docs" / "guides" / "your-own-model.md").read_text(encoding="utf-8")
    said = re.search(
        r"κ\(P\) goes from ((?:≥ )?\S+) in layer 0 to ((?:≥ )?\S+) in layer 5"
        r".*?μ\(A\)\s=\sκ\(P\)κ\(A_l\)κ\(W_V\) from ((?:≥ )?\S+) to ((?:≥ )?\S+);",
        guide,
        re.S,
    )
    assert said is not None
    rows = {
        r.split("│")[1].split()[0]: [c.strip() for c in r.split("│")[1:]]
        for r in README.splitlines()
        if re.match(r"│ [05] blocks\.[05] ", r)
    }
    header = next(r for r in README.splitlines() if r.startswith("┃ layer"))
    columns = [c.strip() for c in header.split("┃")[1:]]
    kp, mu = columns.index("κ(P)"), columns.index("μ(A)")

    def shown(cell: str) -> str:  # the value as quoted: "≥ 1.7e+07" for a floor, without the ⚠
        return cell.removesuffix("⚠").strip()

    assert shown(rows["0"][kp]) == said[1] and shown(rows["5"][kp]) == said[2]
    assert shown(rows["0"][mu]) == said[3] and shown(rows["5"][mu]) == said[4]


def test_readme_is_a_start_of_at_most_300_lines() -> None:
    assert len(README.splitlines()) <= 300
    for heading in (
        "## What condcli is for",
        "## Install",
        "## In Python",
        "## A 5-minute tour",
        "## Language models",
    ):
        assert f"\n{heading}\n" in README, heading
    for extra in ("pip install condcli ", "condcli[gguf]", "condcli[pandas]", "condcli[lightning]"):
        assert extra in README, extra


def test_every_docs_link_in_the_readme_resolves() -> None:
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#[\w-]+)?\)", README)
    assert len(links) >= 20, links  # every command and guide page is linked
    for link in links:
        assert (ROOT / link).is_file(), link
    for page in [*(ROOT / "docs" / "commands").glob("*.md"), *(ROOT / "docs" / "guides").glob("*.md")]:
        assert f"]({page.relative_to(ROOT)})" in README, f"README does not link {page.relative_to(ROOT)}"


def test_the_tour_quotes_the_demo_table() -> None:
    """The numbers the tour's prose quotes after the demo table are cells of that table (checked above)."""
    block = README.split("<!-- demo:begin -->")[1].split("<!-- demo:end -->")[0]
    prose = README.split("<!-- demo:end -->")[1].split("### 2.")[0]
    quoted = re.findall(r"\d[\d.]*e[+-]\d+|(?<=κ\(X\) = )\d+", prose)
    assert len(quoted) >= 5, quoted
    cells = {
        c.replace("⚠", "").strip().removeprefix("≥ ")
        for line in block.splitlines()
        for c in re.split(r"[│┃]", line)
    }
    for number in quoted:
        assert number in cells, f"the tour quotes {number}, which the demo table does not show"
