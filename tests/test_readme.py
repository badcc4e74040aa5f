"""The README opens with the two set-up commands, then a real plot and the table `make demo` prints."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pytest
from click.testing import Result

from condcli.numbers import APPROX, WARN

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
    result = cli("spectrum", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    block = re.search(r"<!-- demo:begin -->\n```text\n(.*?)\n```\n<!-- demo:end -->", README, re.S)
    assert block is not None, "the README lost its demo table"
    assert_same_at_claimed_precision(block.group(1), result.stdout.rstrip("\n"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".condcli-manifest.json",
        "layers.png",
        "report.html",
        "report.json",
        "spectrum.png",
    ]


def claimed(cell: str) -> tuple[float, float] | None:
    """The interval a printed number claims, or None for text: its value ± one unit of its last digit
    ("151": [150, 152]; "≈9e+09": [8e9, 1e10]); a floor "≥ 1.7e+07" claims [1.6e7, ∞). ⚠ is set aside:
    which samples fall below the floor may differ between machines, the interval is what is compared."""
    text = cell.replace(WARN, "").strip()
    floor = text.startswith("≥ ")
    text = text.removeprefix("≥ ").removeprefix(APPROX)
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return (math.inf, math.inf)
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    ulp = float(Decimal(1).scaleb(exponent))
    return (float(value) - ulp, math.inf if floor else float(value) + ulp)


def assert_same_at_claimed_precision(readme: str, printed: str) -> None:
    """The README's block and the printed one: the same lines and cells, each number within the precision
    both claim (their intervals meet), so that digits below a value's uncertainty, which another machine's
    float32 kernels may change (docs/math.md), never fail the comparison."""
    old, new = readme.splitlines(), printed.splitlines()
    assert len(old) == len(new), printed
    for a, b in zip(old, new, strict=True):
        cells_a, cells_b = re.split(r"[│┃]", a), re.split(r"[│┃]", b)
        assert len(cells_a) == len(cells_b), (a, b)
        for x, y in zip(cells_a, cells_b, strict=True):
            ia, ib = claimed(x), claimed(y)
            if ia is None or ib is None:
                assert x.strip() == y.strip(), (a, b)
            else:
                assert ia[0] <= ib[1] and ib[0] <= ia[1], f"{x.strip()!r} vs {y.strip()!r} in {b}"


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
    """The vanilla ViT's κ(P) and μ(A) quoted beside the blog model are the demo run's (checked above)."""
    import re

    said = re.search(
        r"κ\(P\) goes from ((?:≥ )?\S+) in layer 0 to ((?:≥ )?\S+) in layer 5"
        r".*?μ\(A\)\s=\sκ\(P\)κ\(A_l\)κ\(W_V\) from ((?:≥ )?\S+) to ((?:≥ )?\S+);",
        README,
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
