"""`condcli compare A.json B.json` (docs/commands/compare.md#saved-reports): two saved reports compare as the
two models do (the same JSON at the golden precision, the same tables), every value and ratio is the files'
own, one report against one model runs the model with the report's settings, and a file that is not a
comparable report is one line, exit 2."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from condcli import gate
from tests.golden_reports import differences

FAST = ["--max-samples", "2", "--batch-size", "2", "--layers", "0,-1"]


@pytest.fixture(scope="module")
def saved(cli: Callable[..., Result], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Spectrum reports of both samples (without and with vit-plain's conditioned forward), saved as files,
    and the compare of the two models with the same settings."""
    folder = tmp_path_factory.mktemp("saved")
    runs = {
        "a": ("spectrum", "vit-plain", *FAST, "--no-conditioned"),
        "b": ("spectrum", "vit-conditioned", *FAST, "--no-conditioned"),
        "a_cond": ("spectrum", "vit-plain", *FAST),
        "models": ("compare", "vit-plain", "vit-conditioned", *FAST),
        "models_cond": ("compare", "vit-plain", "vit-conditioned", *FAST, "--conditioned"),
    }
    files = {}
    for name, args in runs.items():
        result = cli(*args, "--json")
        assert result.exit_code == 0, result.output
        files[name] = folder / f"{name}.json"
        files[name].write_text(result.stdout, encoding="utf-8")
    return files


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _compare(cli: Callable[..., Result], *args: str | Path) -> tuple[dict[str, Any], Result]:
    result = cli("compare", *map(str, args), "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data, result


def test_two_saved_reports_compare_as_the_two_models_do(
    saved: dict[str, Path], cli: Callable[..., Result]
) -> None:
    reports, result = _compare(cli, saved["a"], saved["b"])
    models = _json(saved["models"])
    assert differences(models, reports) == []  # numbers equal at the golden precision, all else equal
    assert reports["warnings"] and reports["warnings"] == models["warnings"]
    assert "warning: B adds X + 1·I_k at X itself" in result.stderr
    assert differences(_json(saved["a"]), reports["a"]) == [] and reports["b"] == _json(saved["b"])


def _value(report: dict[str, Any], key: str) -> float:
    """A metric's value read from a saved report by its compare key ("embedding.kappa",
    "layers[5].conditioned.mu_la", "layers[0].kappa_wq"): the median of an aggregate, a weight's number."""
    found = re.fullmatch(r"layers\[(\d+)\]\.(.+)", key)
    if found is None:
        node: Any = report["embedding"]
        path = key.split(".")[1:]
    else:
        node = next(layer for layer in report["layers"] if layer["index"] == int(found[1]))
        path = found[2].split(".")
    for part in path:
        node = node[part]
    return float(node["median"] if isinstance(node, dict) else node)


def test_every_value_and_ratio_is_the_files_own(saved: dict[str, Path], cli: Callable[..., Result]) -> None:
    a, b = _json(saved["a"]), _json(saved["b"])
    compared, _ = _compare(cli, saved["a"], saved["b"])
    rows = compared["metrics"]
    assert len(rows) > 20 and {r["metric"] for r in rows} >= {"embedding.kappa", "layers[5].mu_la"}
    seen = rows[0]  # A's blocks see X, B's its own X + 1·I_k
    assert seen["metric"] == "embedding.seen"
    assert (seen["a"], seen["b"]) == (_value(a, "embedding.kappa"), _value(b, "embedding.kappa_conditioned"))
    for row in rows[1:]:
        x, y = _value(a, row["metric"]), _value(b, row["metric"])
        assert (float(row["a"]), float(row["b"])) == (x, y), row["metric"]
        assert row["ratio"] == pytest.approx(y / x, rel=1e-12), row["metric"]


def test_the_table_of_two_reports_is_the_table_of_two_models(
    saved: dict[str, Path], cli: Callable[..., Result]
) -> None:
    reports = cli("compare", str(saved["a"]), str(saved["b"]))
    models = cli("compare", "vit-plain", "vit-conditioned", *FAST)
    assert reports.exit_code == models.exit_code == 0, reports.output + models.output
    got, want = reports.stdout.splitlines(), models.stdout.splitlines()
    assert got[0] == want[0].replace("(command line)", f"(saved report {saved['a']})")
    assert got[2] == want[2].replace("(command line)", f"(saved report {saved['b']})")
    assert (got[1], got[3], got[4:]) == (want[1], want[3], want[4:])


def test_the_page_and_report_json_of_two_reports(
    saved: dict[str, Path], cli: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "cmp"
    result = cli("compare", str(saved["a"]), str(saved["b"]), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert _json(out / "report.json") == json.loads(result.stdout)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "vit-conditioned" in page and "vit-plain" in page


def test_one_report_and_one_model_runs_the_model_with_the_reports_settings(
    saved: dict[str, Path], cli: Callable[..., Result]
) -> None:
    # a_cond: vit-plain with its conditioned forward, 2 samples, layers 0,5 — nothing given here
    mixed, result = _compare(cli, saved["a_cond"], "vit-conditioned")
    assert differences(_json(saved["models_cond"]), mixed) == []
    assert (
        f"note: B runs with the settings of A's report {saved['a_cond']}: seed 0, 2 samples, dtype float32, "
        "layers 0,5, the conditioned forward (options given win)"
    ) in result.stderr
    # the other way round, the model on A; an option given wins over the report's
    mixed, result = _compare(cli, "vit-plain", saved["b"], "--layers", "0")
    assert [layer["index"] for layer in mixed["a"]["layers"]] == [0]
    assert mixed["a"]["inputs"]["count"] == 2
    note = f"note: A runs with the settings of B's report {saved['b']}: seed 0, 2 samples, dtype float32, λ 1"
    assert f"{note} (options given win)" in result.stderr.splitlines()
    by_model = {r["metric"]: r for r in mixed["metrics"]}
    assert by_model["layers[0].mu_la"]["b"] == _value(_json(saved["b"]), "layers[0].mu_la")


def test_the_library_reads_report_files_too(saved: dict[str, Path]) -> None:
    report = gate.compare(str(saved["a"]), str(saved["b"]))
    assert differences(_json(saved["models"]), report.to_json()) == []


def _check_report(saved: dict[str, Path], tmp_path: Path) -> Path:
    """A real check report of vit-plain (its saved analysis checked again, no model run)."""
    path = tmp_path / "check.json"
    path.write_text(json.dumps(gate.check(_json(saved["a"]), limits={"max_kappa": 1e9}).to_json()))
    return path


def _edited(saved: dict[str, Path], tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = _json(saved["a"])
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


HOSTILE: list[tuple[str, Callable[[dict[str, Path], Path], list[str]], str]] = [
    ("missing", lambda s, t: [str(t / "nope.json"), str(s["b"])], "MODEL_A {t}/nope.json: no such file"),
    ("not JSON", lambda s, t: [_text(t, "x.json", "hello"), str(s["b"])], "MODEL_A {t}/x.json: "),
    ("a JSON array", lambda s, t: [_text(t, "x.json", "[1, 2]"), str(s["b"])], "(not a JSON object)"),
    (
        "another tool's JSON",
        lambda s, t: [_text(t, "x.json", '{"a": 1}'), str(s["b"])],
        "not a condcli report",
    ),
    ("a folder", lambda s, t: [_folder(t), str(s["b"])], "MODEL_A {t}/d.json is a folder, not a file"),
    ("a FIFO", lambda s, t: [_fifo(t), str(s["b"])], "MODEL_A {t}/f.json is a FIFO, not a file"),
    (
        "a compare report beside a model",
        lambda s, t: [str(s["models"]), "vit-conditioned"],
        "is a 'compare' report; a report is a spectrum (or check) report",
    ),
    (
        "reports of two commands",
        lambda s, t: [str(_check_report(s, t)), str(s["b"])],
        "is a 'check' report and MODEL_B {b} a 'spectrum' report: compare reads two reports of one command",
    ),
    (
        "reports of two schema versions",
        lambda s, t: [str(_edited(s, t, lambda d: d.update(schema_version=2))), str(s["b"])],
        "has schema_version 2 and MODEL_B {b} 1: compare reads two reports of one schema version",
    ),
    (
        "a report that does not match the schema",
        lambda s, t: [
            str(_edited(s, t, lambda d: d["embedding"]["kappa"].update(median="big"))),
            str(s["b"]),
        ],
        "does not match condcli's report schema: ['embedding']['kappa']['median']",
    ),
    (
        "B's weights beside a report B",
        lambda s, t: ["vit-plain", str(s["b"]), "--checkpoint", str(t / "w.safetensors")],
        "--checkpoint gives B's weights, and that side is a saved report — drop it",
    ),
    (
        "an option of a run beside two reports",
        lambda s, t: [str(s["a"]), str(s["b"]), "--max-samples", "4"],
        "--max-samples is an option of a run, and both sides are saved reports — drop it",
    ),
]


def _text(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text)
    return str(folder / name)


def _folder(folder: Path) -> str:
    (folder / "d.json").mkdir()
    return str(folder / "d.json")


def _fifo(folder: Path) -> str:
    os.mkfifo(folder / "f.json")
    return str(folder / "f.json")


@pytest.mark.parametrize(("what", "args", "text"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_file_that_is_not_a_comparable_report_is_one_line_and_exit_2(
    what: str,
    args: Callable[[dict[str, Path], Path], list[str]],
    text: str,
    saved: dict[str, Path],
    cli: Callable[..., Result],
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    result = cli("compare", *args(saved, tmp_path), "--out", str(out))
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert text.format(t=tmp_path, b=saved["b"]) in result.stderr, result.stderr
    assert not out.exists()
