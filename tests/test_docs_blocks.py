"""Every printed block of README.md and docs/ is what its command prints today (docs/regenerate.py reruns
them; `.venv/bin/python -m docs.regenerate` rewrites the pages), compared at the precision each number
claims (tests/claims.py): digits below a value's uncertainty never fail. The demo block is checked by
tests/test_readme.py, with the files `make demo` writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs import regenerate as rg
from tests.claims import assert_same_at_claimed_precision, same_at_claimed_precision

TOKEN = re.compile(r"[^\s,;()\[\]]+|[\s,;()\[\]]+")


def _runs(text: str) -> list[tuple[bool, str]]:
    """The block as runs: each table line alone (True), and each stretch of other lines joined into one
    (False), so that prose compares as words whatever column a path of this checkout made it wrap at."""
    runs: list[tuple[bool, str]] = []
    for line in text.splitlines():
        if re.search(r"[│┃]", line):
            runs.append((True, line))
        elif runs and not runs[-1][0]:
            runs[-1] = (False, runs[-1][1] + "\n" + line)
        else:
            runs.append((False, line))
    return runs


def assert_same_block(page: str, printed: str, where: str) -> None:
    """A table line cell by cell (tests/claims.py), any other text token by token (line breaks in prose are
    spaces: a path as long as the checkout's folder wraps it elsewhere), each number within the precision it
    claims."""
    old, new = _runs(page), _runs(printed)
    shape = [t for t, _ in old], [t for t, _ in new]
    assert shape[0] == shape[1], f"{where}: the page and what is printed now differ in layout:\n{printed}"
    for (table, a), (_, b) in zip(old, new, strict=True):
        if table:
            assert_same_at_claimed_precision(a, b)
            continue
        ta, tb = TOKEN.findall(a), TOKEN.findall(b)
        same = len(ta) == len(tb) and all(
            same_at_claimed_precision(x, y) if x.strip() else _space(x) == _space(y)
            for x, y in zip(ta, tb, strict=True)
        )
        assert same, f"{where}: the page says\n  {a}\nnow printed\n  {b}"


def _space(gap: str) -> str:
    """A gap between words as it reads: a line break inside prose is a space; other spacing is kept."""
    return re.sub(r" *\n *", " ", gap)


def _shown() -> dict[str, list[tuple[Path, str]]]:
    found: dict[str, list[tuple[Path, str]]] = {}
    for page in rg.PAGES:
        for name, texts in rg.shown(page.read_text(encoding="utf-8")).items():
            found.setdefault(name, []).extend((page, t) for t in texts)
    return found


SHOWN = _shown()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docs-blocks")


@pytest.mark.parametrize("name", sorted(set(rg.BLOCKS) - {"demo"}))
def test_block_is_what_its_command_prints_today(name: str, work: Path) -> None:
    assert name in SHOWN, f"block {name} is shown on no page"
    printed = rg.run(name, work)
    for page, text in SHOWN[name]:
        assert_same_block(text, printed, f"{page.relative_to(rg.ROOT)} block {name}")


def test_every_marked_block_has_a_command() -> None:
    assert set(SHOWN) <= set(rg.BLOCKS), sorted(set(SHOWN) - set(rg.BLOCKS))
    assert "demo" in SHOWN and (rg.ROOT / "README.md", SHOWN["demo"][0][1]) in SHOWN["demo"]


def test_every_text_block_in_the_pages_is_marked() -> None:
    """A ```text block is a printed block, marked so that it is rerun; the one exception is the LLM guide's
    prompt file (input, checked below)."""
    for page in rg.PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"^```text\n", text, re.M):
            before = text[: m.start()].rstrip("\n").splitlines()
            marked = bool(before) and re.fullmatch(r"<!-- [\w-]+:begin -->", before[-1]) is not None
            prompts = text[m.end() :].startswith(rg.PROMPTS)
            assert marked or prompts, f"{page.relative_to(rg.ROOT)}: unmarked block {text[m.end() :][:60]!r}"


def test_the_python_code_shown_is_the_code_run() -> None:
    for page in (rg.ROOT / "README.md", rg.DOCS / "guides" / "python.md"):
        assert f"```python\n{rg.API}```\n\nprints\n\n<!-- python:begin -->" in page.read_text(
            encoding="utf-8"
        ), page


def test_the_llm_prompts_shown_are_those_run() -> None:
    assert f"```text\n{rg.PROMPTS}```" in (rg.DOCS / "guides" / "llms.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("page", "printed", "same"),
    [
        ("recommended: λ = 12 — median 1.98, is ≤ 2", "recommended: λ = 12 — median 1.97, is ≤ 2", True),
        ("recommended: λ = 12 — median 1.98, is ≤ 2", "recommended: λ = 15 — median 1.98, is ≤ 2", False),
        ("     0 blocks.0    161 1.89e+09", "     0 blocks.0    162 1.89e+09", True),
        ("     0 blocks.0    161 1.89e+09", "     0 blocks.0    161 1.99e+09", False),
        ("max_kappa κ(X) 161 ≤ 200 PASS", "max_kappa κ(X) 161 ≤ 200 FAIL", False),
    ],
)
def test_lines_compare_at_claimed_precision(page: str, printed: str, same: bool) -> None:
    if same:
        assert_same_block(page, printed, "test")
    else:
        with pytest.raises(AssertionError):
            assert_same_block(page, printed, "test")
