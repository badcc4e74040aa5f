"""JUnit's ``time`` is the run's wall time: what ``check_junit`` is given (the whole command, loading the
model included), not the analysis alone. The end-to-end test slows loading by a known sleep and asks for a
time at least that long (a lower bound only: no test asserts a timing's upper bound)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from condcli.gate.junit import check_junit
from condcli.gate.report import CheckReport, CheckResult

SLEEP_S = 0.8


def _report(elapsed_s: float | None) -> CheckReport:
    ok = CheckResult(
        rule="max_kappa",
        metric="embedding.kappa",
        label="κ(X)",
        statistic="median",
        value=80.0,
        limit=100.0,
        passed=True,
        reason=None,
        source="command line",
        baseline=None,
    )
    data = {"model": {"spec": "m"}, "tool": {"version": "0"}, "settings": {}}
    return CheckReport(
        data, "median", (ok,), None, (), None, started="2020-01-01T00:00:00+00:00", elapsed_s=elapsed_s
    )


def _times(document: bytes) -> list[float]:
    root = ET.fromstring(document)
    return [float(root.get("time", "nan"))] + [float(s.get("time", "nan")) for s in root.iter("testsuite")]


def test_the_time_given_is_the_documents_time() -> None:
    report = _report(elapsed_s=0.339)  # the analysis alone
    assert _times(check_junit(report, elapsed_s=14.25)) == [14.25, 14.25]
    assert _times(check_junit(report)) == [0.339, 0.339]  # nothing given: the report's own
    assert _times(check_junit(_report(elapsed_s=None))) == [0.0, 0.0]  # a saved report ran nothing


def test_check_junit_time_covers_loading_the_model(
    tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    import condcli.loading.sources as sources

    real = sources.load

    def slow_load(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SLEEP_S)  # loading a big model: seconds the analysis does not see
        return real(*args, **kwargs)

    monkeypatch.setattr(sources, "load", slow_load)
    junit = tmp_path / "junit.xml"
    args = ("vit-plain", "--max-samples", "1", "--layers", "none", "--max-kappa", "1e12")
    result = cli("check", *args, "--junit", str(junit))
    assert result.exit_code == 0, result.output
    times = _times(junit.read_bytes())
    assert min(times) >= SLEEP_S, times
