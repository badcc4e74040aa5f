"""Code and docs cite the repository's own design and math pages (docs/), never a document a person who clones
condcli does not have: every `docs/NAME.md#anchor` cited names a page that exists and a section it has."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# a page, then its anchors: "docs/math.md#x", "docs/math.md#spectra, #layers", "docs/math.md#spectra to
# #ranks"
CITATION = re.compile(r"docs/((?:[a-z_-]+/)*[a-z_-]+\.md)((?:#[\w-]+)(?:(?:, | and | to )#[\w-]+)*)?")
SOURCES = [
    *sorted((ROOT / "condcli").rglob("*.py")),
    *sorted((ROOT / "bench").rglob("*.py")),
    *sorted((ROOT / "tests").rglob("*.py")),
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "README.md",
]


def slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading: lower case, punctuation dropped, spaces
    as hyphens."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


@cache
def anchors(page: str) -> frozenset[str]:
    """The anchors of a docs page: its headings' (lines in fenced code blocks are no headings) and the short
    ones it sets with ``<a id="…"></a>``."""
    found, fenced = set(), False
    for line in (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(m.group(1)))
        elif not fenced and (m := re.match(r'<a id="([\w-]+)"></a>$', line)):
            found.add(m.group(1))
    return frozenset(found)


def citations() -> list[tuple[str, int, str, str | None]]:
    """(file, line, page, anchor or None) of every citation of a docs page in the sources."""
    out = []
    for path in SOURCES:
        if path == Path(__file__):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in CITATION.finditer(line):
                where = str(path.relative_to(ROOT))
                names = re.findall(r"#([\w-]+)", m.group(2) or "")
                out += [(where, number, m.group(1), a) for a in names] or [(where, number, m.group(1), None)]
    return out


def test_no_citation_of_a_document_the_repository_does_not_have() -> None:
    """SPEC.md and DESIGN.md are background the developers had; the repository cites its own docs/."""
    old = re.compile(r"SPEC §|\(SPEC, [A-Z][a-z]+\)|\bDESIGN\.md|\bSPEC\.md")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in SOURCES
        if path != Path(__file__)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if old.search(line)
    ]
    assert not found, found


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
        ("math.md", {"x", "spectra", "layers", "rank-decay", "ranks", "aggregation", "json", "cli"}),
        ("design.md", {"data-flow", "layers", "extension-points", "house-style"}),
    ],
)
def test_the_pages_exist_with_their_sections(page: str, sections: set[str]) -> None:
    assert sections <= anchors(page)


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors_of(path: Path) -> frozenset[str]:
    return (
        anchors(str(path.relative_to(ROOT / "docs")))
        if (ROOT / "docs") in path.parents
        else _readme_anchors()
    )


@cache
def _readme_anchors() -> frozenset[str]:
    found, fenced = set(), False
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.add(slug(m.group(1)))
    return frozenset(found)


def test_every_relative_link_of_the_pages_resolves() -> None:
    """Every relative Markdown link in README.md and docs/ names a file that exists, and a section it has."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    checked = 0
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                where = f"{page.relative_to(ROOT)}:{number}"
                file = (page.parent / path).resolve() if path else page
                assert file.exists(), f"{where} links {target}: no such file"
                if anchor and file.suffix == ".md":
                    assert anchor in _anchors_of(file), f"{where} links {target}: no such section"
                checked += 1
    assert checked > 50
