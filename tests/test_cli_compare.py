"""`condcli compare A B` end to end: both analyses equal standalone spectrum runs, ratios equal B/A of the
two reports' own values, the table prints those numbers, and differing input kinds are compared and said."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from condcli.cli import app, main
from condcli.gate.baseline import load_baseline
from condcli.gate.report import fmt
from docs.regenerate import TERMINAL

FAST = ["--max-samples", "2", "--batch-size", "2", "--layers", "0,-1"]


@pytest.fixture(scope="module")
def compared(cli: Callable[..., Result]) -> dict[str, Any]:
    result = cli("compare", "vit-plain", "vit-conditioned", *FAST, "--json")
    assert result.exit_code == 0, result.output
    assert "warning: B adds X + 1·I_k at X itself" in result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def number(v: float | str) -> float:
    return float(v)


def test_both_sides_are_the_spectrum_analysis_of_each_model(
    compared: dict[str, Any], cli_json: Callable[..., dict[str, Any]]
) -> None:
    assert compared["command"] == "compare" and compared["schema_version"] == 1
    for side, model in (("a", "vit-plain"), ("b", "vit-conditioned")):
        alone = cli_json("spectrum", model, *FAST, "--no-conditioned")
        assert compared[side]["model"]["spec"] == model
        assert compared[side]["embedding"]["kappa"] == alone["embedding"]["kappa"]
        assert [layer["mu_la"] for layer in compared[side]["layers"]] == [
            layer["mu_la"] for layer in alone["layers"]
        ]


def test_ratios_are_b_over_a_of_the_two_reports(compared: dict[str, Any]) -> None:
    a, b = compared["a"], compared["b"]
    rows = {r["metric"]: r for r in compared["metrics"]}
    assert list(rows)[:5] == [
        "embedding.seen",
        "embedding.kappa",
        "embedding.kappa_distinct",
        "embedding.kappa_conditioned",
        "embedding.kappa_corrected",
    ]
    for key in ("kappa", "kappa_conditioned", "kappa_corrected"):
        x, y = a["embedding"][key]["median"], b["embedding"][key]["median"]
        assert (rows[f"embedding.{key}"]["a"], rows[f"embedding.{key}"]["b"]) == (x, y)
        assert rows[f"embedding.{key}"]["ratio"] == pytest.approx(y / x, rel=1e-12)
    seen = rows["embedding.seen"]  # A's blocks see X, B's see its own X + 1·I_k
    assert seen["a"] == a["embedding"]["kappa"]["median"]
    assert seen["b"] == b["embedding"]["kappa_conditioned"]["median"]
    for i, (la, lb) in enumerate(zip(a["layers"], b["layers"], strict=True)):
        for key in ("kappa", "kappa_attn_input", "mu_la", "mu_a", "kappa_probs"):
            row = rows[f"layers[{la['index']}].{key}"]
            assert row["ratio"] == pytest.approx(
                number(lb[key]["median"]) / number(la[key]["median"]), rel=1e-12
            )
        row = rows[f"layers[{la['index']}].kappa_wq"]
        assert row["ratio"] == pytest.approx(lb["kappa_wq"] / la["kappa_wq"], rel=1e-12), i
    assert rows["layers[0].kappa"]["ratio"] < 0.25  # the conditioned sample's blocks see a far smaller κ


def test_table_prints_the_same_numbers(compared: dict[str, Any], cli: Callable[..., Result]) -> None:
    result = cli("compare", "vit-plain", "vit-conditioned", *FAST)
    assert result.exit_code == 0, result.output
    out = result.stdout
    rows = {r["metric"]: r for r in compared["metrics"]}
    k = rows["embedding.kappa"]
    line = next(s for s in out.splitlines() if s.startswith("│ κ(X) "))
    assert [c.strip() for c in line.strip("│ ").split("│")] == [
        "κ(X)",
        fmt(k["a"]),
        fmt(k["b"]),
        fmt(k["ratio"]),
    ]
    mu = rows["layers[5].mu_la"]
    line = next(s for s in out.splitlines() if s.startswith("│ 5 blocks.5") and "→" in s and "μ" not in s)
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells[5:7] == [f"{fmt(mu['a'])} → {fmt(mu['b'])}", fmt(mu["ratio"])]
    assert "κ of the tokens the blocks see" in out and "= κ(X + 1·I_k)" in out


def test_models_with_different_inputs_are_compared_and_it_is_said(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "cmp"
    result = cli(
        "compare", "gpt2-docstrings", "vit-plain", "--max-samples", "2", "--layers", "none", "--json",
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["a"]["inputs"]["kind"] == "text" and r["b"]["inputs"]["kind"] == "synthetic"
    assert r["warnings"][0].startswith("A saw text inputs") and "A saw text inputs" in result.stderr
    assert json.loads((out / "report.json").read_text()) == r
    assert [m["metric"] for m in r["metrics"]] == [
        "embedding.kappa",
        "embedding.kappa_distinct",
        "embedding.kappa_conditioned",
        "embedding.kappa_corrected",
    ]


def test_each_side_of_a_compare_is_a_usable_baseline(compared: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(compared["a"]))
    assert load_baseline(path, "median").model == "vit-plain"


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["vit-plain", "no-such-model-xyz"], "no-such-model-xyz is a Hugging Face hub id (not a local path"),
        (["vit-plain", "vit-plain", "--statistic", "min"], "--statistic 'min' is not known"),
        (["vit-plain", "gpt2-docstrings", "--layers", "5"], "--layers asks for a layer"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(
    args: list[str], text: str, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "o"
    result = cli("compare", *args, "--max-samples", "2", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert text in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_one_model_against_itself_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # MODEL_B alone is compared with [tool.condcli] model, else the sample ViT: here vit-plain twice
    assert main(["compare", "vit-plain"]) == 2
    err = capsys.readouterr().err
    assert "A and B are both vit-plain" in err and len(err.splitlines()) == 1


def test_readme_numbers_are_what_compare_prints_today() -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "commands" / "compare.md"
    section = page.read_text(encoding="utf-8")
    # the page shows what a 100-column terminal prints (docs/regenerate.py TERMINAL): the table fits it
    args = ["compare", "vit-plain", "vit-conditioned", "--layers", "0,-1"]
    result = CliRunner().invoke(app, args, env=TERMINAL)
    assert result.exit_code == 0, result.output
    block = section.split("```text\n")[1].split("```")[0]
    for line in block.splitlines():
        assert line in result.stdout, line
    for text in ("1.5e+09 → 1e+07", "0.00667", "1.73e+11 → 1.17e+09", "0.00675"):
        assert text in result.stdout and text in section, text
