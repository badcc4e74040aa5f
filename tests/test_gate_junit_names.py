"""JUnit testcase names are the same run after run (README: CI history lines up): no number of the run — λ,
how many layers were analysed, the worst layer, a limit — is in a name; a baseline metric is named by its
key (``layers[3].mu_la``), whose layer index is the only digit a name holds. The numbers are in the detail.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from condcli.cli import main

FAST = ["--max-samples", "2", "--batch-size", "2"]
RULES = ["--max-kappa", "--max-kappa-layer", "--max-mu-la", "--min-stable-rank"]


def names(path: Path) -> tuple[set[str], set[str]]:
    """(the rule testcases' names, the baseline testcases' names) of a JUnit file."""
    suites = {s.get("name"): s for s in ET.parse(path).getroot().findall("testsuite")}
    rules = {str(c.get("name")) for c in suites["condcli check"].findall("testcase")}
    base = suites.get("condcli baseline")
    return rules, set() if base is None else {str(c.get("name")) for c in base.findall("testcase")}


def run(tmp: Path, capfd: pytest.CaptureFixture[str], *args: str) -> None:
    capfd.readouterr()
    code = main(["check", *args])
    assert code in (0, 1), capfd.readouterr().err  # a check may fail: its JUnit file is written all the same


def test_testcase_names_do_not_change_with_lambda_layers_or_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    assert main(["spectrum", "vit-plain", *FAST, "--lambda", "5", "--json"]) == 0
    (tmp_path / "base.json").write_text(capfd.readouterr().out, encoding="utf-8")
    common = ["vit-plain", *FAST, "--baseline", "base.json"]
    a_limits = [x for r in RULES for x in (r, "1e9" if r != "--min-stable-rank" else "1")]
    b_limits = [x for r in RULES for x in (r, "2e9" if r != "--min-stable-rank" else "1.5")]
    run(tmp_path, capfd, *common, "--lambda", "5", "--layers", "0,1", *a_limits, "--junit", "a.xml")
    run(tmp_path, capfd, *common, "--lambda", "7", "--layers", "0,1,2", *b_limits, "--junit", "b.xml")
    (rules_a, base_a), (rules_b, base_b) = names(tmp_path / "a.xml"), names(tmp_path / "b.xml")
    assert len(rules_a) == len(RULES) and rules_a == rules_b
    assert "embedding.kappa_conditioned: κ(X + λ·I_k)" in base_a
    assert base_a and base_a <= base_b  # B analysed one layer more: its metrics are B's only extra names
    assert {re.sub(r"^layers\[\d+\]", "", n) for n in base_b - base_a} <= {
        re.sub(r"^layers\[\d+\]", "", n) for n in base_a
    }
    for name in rules_a | base_b:
        assert not re.search(r"\d", re.sub(r"^layers\[\d+\]\.", "", name)), name


def test_the_numbers_are_in_the_detail_not_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A model that adds its own λ·I_k at X: the rule is named for κ(X + λ·I_k), its λ is in the detail."""
    monkeypatch.chdir(tmp_path)
    run(
        tmp_path,
        capfd,
        "vit-conditioned",
        *FAST,
        "--max-kappa",
        "1e9",
        "--max-mu-la",
        "1e9",
        "--junit",
        "j.xml",
    )
    cases = ET.parse(tmp_path / "j.xml").getroot().findall(".//testcase")
    assert [c.get("name") for c in cases] == ["max_kappa: κ(X + λ·I_k)", "max_mu_la: μ(LA)"]
    details = [(c.findtext("system-out") or "") + (c.findtext("failure") or "") for c in cases]
    assert re.search(r"κ\(X \+ \d+(\.\d+)?·I_k\)", details[0]), details[0]
    assert re.search(r"worst of \d+ layers", details[1]), details[1]
