"""Code and docs cite the repository's own design and math pages (docs/), never a document a person who clones
condcli does not have: every `docs/NAME.md#anchor` cited names a page that exists and a section it has."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CITATION = re.compile(r"docs/([a-z_-]+\.md)(?:#([\w-]+))?")
SOURCES = [
    *sorted((ROOT / "condcli").rglob("*.py")),
    *sorted((ROOT / "bench").rglob("*.py")),
    *sorted((ROOT / "tests").rglob("*.py")),
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
]


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading: lower case, punctuation dropped, spaces
    as hyphens."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


@cache
def anchors(page: str) -> frozenset[str]:
    """The anchors of a docs page's headings (lines in fenced code blocks are no headings)."""
    found, fenced = set(), False
    for line in (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(m.group(1)))
    return frozenset(found)


def citations() -> list[tuple[str, int, str, str | None]]:
    out = []
    for path in SOURCES:
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in CITATION.finditer(line):
                out.append((str(path.relative_to(ROOT)), number, m.group(1), m.group(2)))
    return out


def test_slugs_are_githubs() -> None:
    assert slug("Floors: below the capture's resolution") == "floors-below-the-captures-resolution"
    assert slug("The matrix X") == "the-matrix-x"


def test_every_citation_names_a_page_and_a_section_that_exist() -> None:
    found = citations()
    assert found, "nothing cites docs/ (the pattern or the sources moved)"
    for where, number, page, anchor in found:
        assert (ROOT / "docs" / page).is_file(), f"{where}:{number} cites docs/{page}, which does not exist"
        if anchor is not None:
            assert anchor in anchors(page), f"{where}:{number} cites docs/{page}#{anchor}: no such section"


@pytest.mark.parametrize(
    ("page", "sections"),
    [
        ("math.md", {"the-matrix-x", "spectra-and-condition-numbers", "digits-a-capture-supports"}),
        ("design.md", {"data-flow", "layers", "extension-points", "house-style"}),
    ],
)
def test_the_pages_exist_with_their_sections(page: str, sections: set[str]) -> None:
    assert sections <= anchors(page)
