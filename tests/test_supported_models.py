"""docs/commands/models.md's supported-models table is what tests/supported_models.py generates from the
conformance list, and what it says about each case agrees with what the case itself declares (observable P,
head counts)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import supported_models as sm
from tests.conformance_cases import CASES
from tests.families import Case


def stale(readme: str, expected: str) -> str | None:
    """Why ``readme``'s table is not ``expected`` (None: it is), naming the command that regenerates it."""
    found = sm.section(readme)
    if found is None:
        return f"docs/commands/models.md lost its {sm.BEGIN} … {sm.END} section"
    if found != expected:
        return (
            "docs/commands/models.md's supported-models table is not what tests/conformance_cases.py gives: "
            f"run `{sm.COMMAND}` and commit docs/commands/models.md"
        )
    return None


def test_readme_table_is_generated_from_the_conformance_cases() -> None:
    why = stale(sm.PAGE.read_text(encoding="utf-8"), sm.table(sm.rows()))
    assert why is None, why


def test_a_case_added_without_regenerating_fails_with_the_command() -> None:
    extra = {family: dict(variants) for family, variants in CASES.items()}
    extra["generic"]["llama_copy"] = CASES["generic"]["llama"]
    why = stale(sm.PAGE.read_text(encoding="utf-8"), sm.table(sm.rows(extra)))
    assert why is not None and sm.COMMAND in why


def _case(row: sm.Row) -> Case:
    family, variant = row.case.split("/")
    return CASES[family][variant]


def test_every_case_of_a_library_model_has_a_row() -> None:
    listed = {r.case for r in sm.rows()}
    for family, variants in CASES.items():
        for variant, case in variants.items():
            module = type(case.build()).__module__
            assert (f"{family}/{variant}" in listed) == (not module.startswith("tests.")), (family, variant)


def test_unobservable_p_is_said_exactly_where_the_case_declares_it() -> None:
    for row in sm.rows():
        assert ("not observable" in row.probs) == (not _case(row).observable), row


def test_heads_are_those_of_the_case_sites() -> None:
    for row in sm.rows():
        case = _case(row)
        sites = case.sites(case.build())
        want = dict.fromkeys(
            str(s.heads) if s.role_heads("k") == s.heads else f"{s.heads} (KV {s.role_heads('k')})"
            for s in sites
        )
        assert row.heads == "; ".join(want), row


def test_regenerate_fills_the_section_and_then_leaves_it(tmp_path: Path) -> None:
    copy = tmp_path / "README.md"
    shutil.copy(sm.PAGE, copy)
    text = copy.read_text(encoding="utf-8")
    section = sm.section(text)
    assert section is not None
    copy.write_text(text.replace(section, f"{sm.BEGIN}\nold\n{sm.END}"), encoding="utf-8")
    assert sm.regenerate(copy) is True
    assert sm.section(copy.read_text(encoding="utf-8")) == sm.table(sm.rows())
    assert sm.regenerate(copy) is False


def test_regenerate_refuses_a_readme_without_the_markers(tmp_path: Path) -> None:
    bare = tmp_path / "README.md"
    bare.write_text("# nothing here\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="supported-models:begin"):
        sm.regenerate(bare)
