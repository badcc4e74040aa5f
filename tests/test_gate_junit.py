"""JUnit XML from the CI gate's results: one testcase per rule and metric with the right counts, written
atomically, its path checked before any work."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from condcli.errors import UsageError
from condcli.gate.junit import check_junit_path, junit_xml, write_junit
from condcli.gate.report import CheckResult


def result(rule: str, passed: bool, metric: str = "embedding.kappa") -> CheckResult:
    return CheckResult(
        rule=rule,
        metric=metric,
        label="κ(X)",
        statistic="median",
        value=120.0 if not passed else 80.0,
        limit=100.0,
        passed=passed,
        reason=None if passed else "κ(X) median 120 > 100",
        source="command line",
        baseline=90.0 if rule == "baseline" else None,
    )


def test_junit_has_one_testcase_per_rule_and_metric_with_the_right_counts(tmp_path: Path) -> None:
    results = [
        result("max_kappa", False),
        result("max_mu_la", True),
        result("baseline", True, "embedding.kappa"),
        result("baseline", False, "layers[3].mu_la"),
        result("baseline", True, "layers[3].kappa"),
    ]
    path = tmp_path / "ci" / "junit.xml"
    check_junit_path(path)  # a missing folder is fine: it is made when written
    write_junit(path, junit_xml(results, {"model": "vit-plain"}, 1.5, "2025-01-01T00:00:00+00:00"))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures")) == ("5", "2")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("condcli check", "2", "1", "0"),
        ("condcli baseline", "3", "1", "0"),
    ]
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == [
        "max_kappa: κ(X)",
        "max_mu_la: κ(X)",
        "embedding.kappa: κ(X)",
        "layers[3].mu_la: μ(LA)",  # a baseline metric: its key and the registry's label
        "layers[3].kappa: κ(X_l)",
    ]
    assert cases[3].get("classname") == "condcli.baseline.layers[3]"
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "κ(X) median 120 > 100"
    assert failure.get("type") == "threshold" and "limit: 100" in (failure.text or "")
    assert len(root.findall(".//failure")) == 2
    props = suites[0].find("properties")
    assert props is not None and props[0].attrib == {"name": "model", "value": "vit-plain"}
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)  # a normal file's mode, not mkstemp's
    assert sorted(p.name for p in path.parent.iterdir()) == ["junit.xml"]


def test_junit_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "junit.xml"
    path.write_text("old")

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(UsageError, match="writing failed"):
        write_junit(path, b"<testsuites/>")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["junit.xml"]


def test_junit_path_is_checked_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_junit_path(tmp_path / "file" / "junit.xml")
    with pytest.raises(UsageError, match="is a folder"):
        check_junit_path(tmp_path)
