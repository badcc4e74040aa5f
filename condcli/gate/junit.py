"""check's results as a ``junit`` file: JUnit XML (the dialect GitHub and GitLab reporters read).

Layout: ``<testsuites>`` with one ``<testsuite name="condcli check">`` holding one ``<testcase>`` per
threshold rule, and, with a baseline, a ``<testsuite name="condcli baseline">`` holding one ``<testcase>``
per compared metric. A failed rule or regressed metric carries ``<failure message=… type=…>``; testcase
names hold no run's numbers, so CI history lines up run after run. The ``time`` of ``<testsuites>`` and of
the check suite is the run's wall time (:func:`check_junit`'s ``elapsed_s``: for ``condcli check`` the whole
command, loading the model and the analysis included); each testcase's is 0 (a rule costs nothing apart).
The file is written to a temporary file beside it and moved into place (``os.replace``): it appears whole or
not at all.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from condcli.gate.report import CheckReport, CheckResult, fmt, fmt_pair
from condcli.outpaths import Inputs, check_file_target, shown, write_file


def check_junit_path(path: Path, inputs: Inputs = ()) -> None:
    """Refuse, before any work, a ``junit`` path that cannot or must not be written: empty, a name too long,
    a folder, a FIFO or a device (only regular files are written), below a file, a dangling symlink, a
    folder that takes no new file, or one of ``inputs`` (what the run reads: (label, path) pairs)."""
    check_file_target(path, f"`junit={shown(path)}`", inputs)


def _case(suite: ET.Element, classname: str, result: CheckResult, time_s: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=result.title, time=time_s)
    value, limit = fmt_pair(result.value, result.limit)
    detail = [
        f"metric: {result.metric} ({result.statistic}): {result.label}",
        f"value: {value}",
        f"limit: {limit}",
        f"source of the limit: {result.source}",
    ]
    if result.baseline is not None:
        detail[1:3] = [
            f"value: {fmt(result.value, 6)}",
            f"baseline: {fmt(result.baseline, 6)}",
            f"limit: {limit}",
        ]
    if result.reason:
        detail.append(f"reason: {result.reason}")
    if not result.passed:
        kind = "regression" if result.rule == "baseline" else "threshold"
        failure = ET.SubElement(case, "failure", message=result.reason or "failed", type=kind)
        failure.text = "\n".join(detail)
    else:
        ET.SubElement(case, "system-out").text = "\n".join(detail)


def _suite(
    parent: ET.Element,
    name: str,
    results: Sequence[CheckResult],
    properties: Mapping[str, str],
    time_s: float,
    timestamp: str,
) -> None:
    failures = sum(not r.passed for r in results)
    suite = ET.SubElement(
        parent,
        "testsuite",
        name=name,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{time_s:.3f}",
        timestamp=timestamp,
    )
    props = ET.SubElement(suite, "properties")
    for key, value in properties.items():
        ET.SubElement(props, "property", name=key, value=value)
    for r in results:
        classname = "condcli.check" if r.rule != "baseline" else "condcli.baseline." + r.metric.split(".")[0]
        _case(suite, classname, r, "0")


def junit_xml(
    results: Sequence[CheckResult], properties: Mapping[str, str], time_s: float, timestamp: str
) -> bytes:
    """The JUnit document (UTF-8, with an XML declaration)."""
    rules = [r for r in results if r.rule != "baseline"]
    metrics = [r for r in results if r.rule == "baseline"]
    root = ET.Element(
        "testsuites",
        name="condcli",
        tests=str(len(results)),
        failures=str(sum(not r.passed for r in results)),
        errors="0",
        time=f"{time_s:.3f}",
    )
    if rules or not metrics:
        _suite(root, "condcli check", rules, properties, time_s, timestamp)
    if metrics:
        _suite(root, "condcli baseline", metrics, properties, 0.0, timestamp)
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"


def check_junit(report: CheckReport, elapsed_s: float | None = None) -> bytes:
    """The JUnit document of a check, with the run's context as the suites' properties. ``elapsed_s``: the
    run's wall time in seconds, from its start (loading the model included) to now; None: the report's own
    ``elapsed_s`` (the analysis alone; 0 for a saved report)."""

    def get(part: str, key: str) -> str:
        found = report.data.get(part)
        return str(found.get(key, "")) if isinstance(found, Mapping) else ""

    properties = {
        "model": get("model", "spec"),
        "condcli": get("tool", "version"),
        "torch": get("tool", "torch"),
        "dtype": get("settings", "dtype"),
        "device": get("settings", "device"),
        "statistic": report.statistic,
    }
    time_s = report.elapsed_s if elapsed_s is None else elapsed_s
    return junit_xml(report.checks, properties, time_s or 0.0, report.started or "")


def write_junit(path: Path, document: bytes) -> None:
    """Write ``document`` to ``path`` atomically (temporary file in the same folder, then os.replace); a
    path that is no regular file (a FIFO, a device) is refused."""
    write_file(path, document, f"`junit={shown(path)}`")
