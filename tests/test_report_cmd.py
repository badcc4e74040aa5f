"""``condcli report FILE.json [-o FILE.html]`` and ``check --out``: a saved report becomes the page, beside
the JSON by default; bad input is one line, exit 2 and no page; an existing page is replaced whole or kept.

Reports here are hand-made (tests/gate_reports.py: docs/math.md#json's keys, NumPy's statistics), among them
one with only the keys of the first schema, so the expected numbers come from NumPy, not from condcli.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import condcli.html
from condcli.cli.main import main
from condcli.cli.report_cmd import default_output
from tests.gate_reports import layer, report

FAST = ("--max-samples", "2", "--batch-size", "2")


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def page_text(path: Path) -> str:
    """The page's text without tags, entities decoded (what a reader sees, also in tables)."""
    import html

    body = re.sub(r"<(script|style)\b.*?</\1>", " ", path.read_text(encoding="utf-8"), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def first_schema() -> dict[str, Any]:
    """A spectrum report with only docs/math.md#json's first keys (no floors, notes, conditioned forward,
    torch)."""
    kappa = [120.0, 135.5, 150.25]
    data = report(kappa, layers=[layer(0, [200.0, 210.0, 220.0], [1e9, 2e9, 3e9])])
    data["tool"] = {"name": "condcli", "version": "0.1.0"}
    data["embedding"]["where"] = "pos_drop"
    for part in data["layers"]:
        del part["below_precision"], part["conditioned"]
    return data


def check_report() -> dict[str, Any]:
    data = report([150.0, 160.0], layers=[layer(0, [300.0, 310.0], [1e9, 2e9])], command="check")
    rule = {"statistic": "median", "reason": None, "source": "command line", "layer": None}
    data["checks"] = [
        {**rule, "rule": "max_kappa", "metric": "embedding.kappa", "label": "κ(X)", "value": 155.0,
         "limit": 100.0, "passed": False, "reason": "κ(X) median 155 > 100"},
        {**rule, "rule": "max_mu_la", "metric": "layers[0].mu_la", "label": "μ(LA)", "value": 1.5e9,
         "limit": 1e12, "passed": True, "layer": {"index": 0, "name": "blocks.0"}},
        {**rule, "rule": "baseline", "metric": "layers[0].kappa", "label": "κ(X_l)", "value": 305.0,
         "limit": 220.0, "passed": False, "baseline": 200.0, "improved": False, "source": "b.json",
         "layer": {"index": 0, "name": "blocks.0"}},
    ]  # fmt: skip
    data.update(statistic="median", config_file=None, passed=False, warnings=["a warning"])
    data["baseline"] = {"file": "b.json", "model": "m", "condcli_version": "0.1.0", "tolerance": 0.1,
                        "compared": 1, "regressed": 1, "improved": 0}  # fmt: skip
    return data


def compare_report() -> dict[str, Any]:
    a, b = report([150.0, 152.0]), report([2.5, 2.7])
    a["model"]["spec"], b["model"]["spec"] = "model-a", "model-b"
    median_a, median_b = (float(np.median(r["embedding"]["kappa"]["per_sample"])) for r in (a, b))
    row = {"metric": "embedding.kappa", "label": "κ(X)", "layer": None, "a": median_a, "b": median_b,
           "ratio": median_b / median_a, "floor": {"a": False, "b": False}}  # fmt: skip
    env = {k: a[k] for k in ("schema_version", "tool")}
    return {
        **env,
        "command": "compare",
        "statistic": "median",
        "a": a,
        "b": b,
        "metrics": [row],
        "warnings": [],
    }


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "page"),
    [("report.json", "report.html"), ("run.JSON", "run.html"), ("baseline", "baseline.html"),
     ("a.b.json", "a.b.html"), ("x.html", "x.html.html")],
)  # fmt: skip
def test_the_page_goes_beside_the_json(name: str, page: str, tmp_path: Path) -> None:
    assert default_output(tmp_path / "d" / name) == tmp_path / "d" / page


def test_a_first_schema_report_renders_beside_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = first_schema()
    source = write(tmp_path / "report.json", data)
    assert main(["report", str(source)]) == 0
    page = tmp_path / "report.html"
    assert f"wrote {page}" in capsys.readouterr().err
    text = page_text(page)
    median = float(np.median([120.0, 135.5, 150.25]))
    assert f"{median:.3g}" in text and "blocks.0" in text and "pos_drop" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.json"]  # nothing else left
    srcs = re.findall(r'(?:src|href)="([^"#][^"]*)"', page.read_text(encoding="utf-8"))
    assert srcs == []  # self-contained: no file, CDN or font is referenced


def test_check_report_page_lists_each_rule_and_regression(tmp_path: Path) -> None:
    source = write(tmp_path / "c.json", check_report())
    assert main(["report", str(source), "-o", str(tmp_path / "out" / "c.html")]) == 0
    text = page_text(tmp_path / "out" / "c.html")
    assert re.search(r"max_kappa κ\(X\) median 155 100 FAIL", text)
    assert re.search(r"max_mu_la μ\(LA\) median 1\.5e\+09 1e\+12 PASS 0 blocks\.0", text)
    ratio = 305.0 / 200.0
    assert re.search(rf"κ\(X ?ℓ ?\) 0 blocks\.0 200 305 220 {ratio:.3g} FAIL", text)
    assert "check failed" in text and "a warning" in text


def test_compare_report_page_has_both_sides_and_the_ratio(tmp_path: Path) -> None:
    source = write(tmp_path / "cmp.json", compare_report())
    assert main(["report", str(source)]) == 0
    text = page_text(tmp_path / "cmp.html")
    a, b = float(np.median([150.0, 152.0])), float(np.median([2.5, 2.7]))
    assert re.search(rf"κ\(X\) {a:.3g} {b:.3g} {b / a:.3g} ↓ B better", text)
    assert "model-a" in text and "model-b" in text


@pytest.mark.parametrize(
    ("make", "key"),
    [(check_report, k) for k in ("checks", "baseline", "passed", "warnings", "embedding", "layers")]
    + [(compare_report, k) for k in ("metrics", "a", "b", "statistic")],
)
def test_a_report_missing_a_part_still_renders(make: Any, key: str, tmp_path: Path) -> None:
    """An older or partial report: the page says what it lacks instead of failing."""
    data = make()
    del data[key]
    source = write(tmp_path / "r.json", data)
    assert main(["report", str(source)]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'class="missing"' in page or key in ("passed", "warnings", "statistic")


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "does not exist"), ("{", "invalid JSON"), ({"x": 1}, "not a condcli report"),
     ({**compare_report(), "command": "models"}, "'models', which has no page"),
     ({**compare_report(), "schema_version": 7}, "newer than the 1")],
)  # fmt: skip
def test_bad_input_is_one_line_and_leaves_no_page(
    content: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "r.json"
    if isinstance(content, str):
        source.write_text(content)
    elif content is not None:
        write(source, content)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["report", str(source), "-o", str(tmp_path / "new" / "r.html")]) == 2
    assert says in error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no page, no folder, no temporary file


def test_a_failed_render_keeps_the_old_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "r.json", first_schema())
    old = tmp_path / "r.html"
    old.write_text("the old page")

    def broken(data: object) -> str:
        raise KeyError("embedding")

    monkeypatch.setattr(condcli.html, "render_html", broken)
    assert main(["report", str(source)]) == 2
    assert "is not a whole spectrum report (KeyError" in error_line(capsys)
    assert old.read_text() == "the old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.json"]


def test_check_out_writes_the_report_and_its_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ci"
    args = ["check", *FAST, "--layers", "none", "--no-conditioned", "--max-kappa", "1e9"]
    assert main([*args, "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads((out / "report.json").read_text(encoding="utf-8")) == printed
    text = page_text(out / "report.html")
    assert "check passed" in text and re.search(r"max_kappa κ\(X\) median \S+ 1e\+09 PASS", text)
    assert sorted(p.name for p in out.iterdir()) == [".condcli-manifest.json", "report.html", "report.json"]
