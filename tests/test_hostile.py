"""Fuzz-style: condcli over a table of hostile and careless inputs (tests/hostile_harness.py says what each
case must do: exit code, one stderr line, no traceback, no file that existed before touched).

The tables live beside the code they exercise:
tests/hostile_cases_{outputs,inputs,loading,numbers,process,readers}.py each export ``CASES``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile_cases_inputs import CASES as INPUTS
from tests.hostile_cases_loading import CASES as LOADING
from tests.hostile_cases_numbers import CASES as NUMBERS
from tests.hostile_cases_outputs import CASES as OUTPUTS
from tests.hostile_cases_process import CASES as PROCESS
from tests.hostile_cases_readers import CASES as READERS
from tests.hostile_harness import Hostile, check

ALL: list[Hostile] = [*OUTPUTS, *INPUTS, *LOADING, *NUMBERS, *PROCESS, *READERS]


def test_ids_are_unique() -> None:
    ids = [case.id for case in ALL]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case", ALL, ids=[case.id for case in ALL])
def test_hostile(
    case: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    check(case, tmp_path, capfd)
