"""`condcli check` end to end: every exit code reached by a real run, values against NumPy and the
spectrum command's JSON, a rule exactly at its limit, config precedence, baselines (a regression caught,
an improvement not flagged), JUnit read back with xml.etree, and one clear line for each bad input.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result

from condcli.cli import main
from condcli.gate.report import fmt_pair
from condcli.loading import sources
from tests.helpers import np_kappa

FAST = ["--max-samples", "2", "--batch-size", "2"]
LAYERS = ["--layers", "0,-1"]


Check = Callable[..., tuple[int, str, str]]
CheckJson = Callable[..., tuple[int, dict[str, Any]]]


@pytest.fixture(scope="module")
def spectrum(cli_json: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The spectrum report of the same run a check makes (its numbers are verified in test_cli_spectrum)."""
    return cli_json("spectrum", "vit-plain", *FAST, *LAYERS, "--no-conditioned")


@pytest.fixture(scope="module")
def check(cli: Callable[..., Result]) -> Check:
    """``check(*args)``: condcli check's exit code, stdout and stderr (never a traceback)."""

    def run(*args: str) -> tuple[int, str, str]:
        result = cli("check", *args)
        assert "Traceback" not in result.output
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture(scope="module")
def check_json(check: Check) -> CheckJson:
    """``check_json(*args)``: condcli check --json's exit code and report, pass or fail."""

    def run(*args: str) -> tuple[int, dict[str, Any]]:
        code, out, _ = check(*args, "--json")
        data: dict[str, Any] = json.loads(out)  # stdout holds the JSON and nothing else, pass or fail
        return code, data

    return run


def hooked_x() -> np.ndarray:
    """X of the first two default inputs, read with the test's own hook on pos_drop."""
    from condcli.inputs.batches import InputSpec, stream
    from condcli.loading.sources import LoadOptions, load

    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    seen: list[torch.Tensor] = []
    h = loaded.model.pos_drop.register_forward_hook(lambda m, a, o: seen.append(o.detach()))
    with torch.no_grad():
        loaded.model(batch.inputs["pixel_values"])
    h.remove()
    return seen[0].double().numpy()


def test_exit_0_when_every_rule_passes_with_values_from_an_independent_reference(
    spectrum: dict[str, Any], check_json: CheckJson
) -> None:
    code, r = check_json(
        "vit-plain", *FAST, *LAYERS, "--max-kappa", "1000", "--max-kappa-layer", "1e4", "--max-mu-la", "1e13"
    )
    assert code == 0 and r["passed"] is True and r["command"] == "check"
    assert {"schema_version", "tool", "model", "inputs", "settings", "embedding", "layers"} <= set(r)
    assert r["tool"]["torch"] == torch.__version__
    checks = {c["rule"]: c for c in r["checks"]}
    assert list(checks) == ["max_kappa", "max_kappa_layer", "max_mu_la"]  # the registry's order
    assert checks["max_kappa"]["value"] == pytest.approx(float(np.median(np_kappa(hooked_x()))), rel=1e-9)
    for rule, key in (("max_mu_la", "mu_la"), ("max_kappa_layer", "kappa")):
        medians = {layer["index"]: layer[key]["median"] for layer in spectrum["layers"]}
        worst = max(medians, key=lambda i: medians[i])
        assert checks[rule]["value"] == medians[worst]
        assert checks[rule]["layer"] == {"index": worst, "name": f"blocks.{worst}"}
        assert checks[rule]["passed"] is True and checks[rule]["source"] == "command line"


def test_exit_1_when_a_rule_fails_prints_rule_value_limit_and_fail(
    spectrum: dict[str, Any], check: Check
) -> None:
    code, out, err = check("vit-plain", *FAST, "--max-kappa", "100")
    kappa = spectrum["embedding"]["kappa"]["median"]
    value, limit = fmt_pair(kappa, 100)
    assert code == 1 and err == ""
    row = next(line for line in out.splitlines() if "max_kappa" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[:5] == ["max_kappa", "κ(X)", value, limit, "FAIL"]
    assert f"κ(X) median {value} > 100" in cells[5]
    assert out.rstrip().endswith("check failed: 0 of 1 rules passed (failed: max_kappa)")


def test_json_on_failure_is_only_json_on_stdout_and_exit_1(
    spectrum: dict[str, Any], cli: Callable[..., Result]
) -> None:
    result = cli("check", "vit-plain", *FAST, "--max-kappa", "100", "--json")
    assert result.exit_code == 1
    r = json.loads(result.stdout)
    assert r["passed"] is False and r["checks"][0]["passed"] is False
    assert r["embedding"]["kappa"] == spectrum["embedding"]["kappa"]
    assert result.stderr == "check failed: max_kappa: κ(X)\n"


def test_a_rule_exactly_at_its_limit_passes(
    spectrum: dict[str, Any], check: Check, check_json: CheckJson
) -> None:
    kappa = spectrum["embedding"]["kappa"]["median"]
    code, r = check_json("vit-plain", *FAST, "--max-kappa", repr(kappa))
    assert code == 0 and r["checks"][0]["value"] == r["checks"][0]["limit"] == kappa
    below = float(np.nextafter(kappa, 0))
    code, out, _ = check("vit-plain", *FAST, "--max-kappa", repr(below))
    value, limit = fmt_pair(kappa, below)
    assert code == 1 and value != limit and f"│ {value} │ {limit} │ FAIL" in out


def test_config_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spectrum: dict[str, Any], check_json: CheckJson
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.condcli]\nmodel = "vit-plain"\n\n[tool.condcli.check]\nmax_kappa = 100\nstatistic = "max"\n'
    )
    code, r = check_json(*FAST)  # MODEL and the rule from the file
    assert code == 1 and r["model"]["spec"] == "vit-plain" and "pyproject.toml" in r["model"]["from"]
    c = r["checks"][0]
    assert c["source"] == str(tmp_path / "pyproject.toml") and c["statistic"] == "max"
    assert c["value"] == spectrum["embedding"]["kappa"]["max"]
    code, r = check_json(*FAST, "--max-kappa", "1000")  # the command line wins; statistic still from file
    assert code == 0 and r["checks"][0]["source"] == "command line" and r["checks"][0]["statistic"] == "max"
    other = tmp_path / "ci" / "gate.toml"
    other.parent.mkdir()
    other.write_text('[tool.condcli.check]\nmax_kappa = 1e4\nstatistic = "mean"\n')
    code, r = check_json(*FAST, "--config", str(other), "vit-plain")  # --config points elsewhere
    assert code == 0 and r["checks"][0]["source"] == str(other) and r["checks"][0]["limit"] == 1e4
    assert r["config_file"] == str(other) and r["statistic"] == "mean"


def baseline_file(tmp_path: Path, report: dict[str, Any], name: str = "baseline.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return path


def test_baseline_of_the_same_run_passes_without_warnings(
    tmp_path: Path, spectrum: dict[str, Any], check: Check
) -> None:
    path = baseline_file(tmp_path, spectrum)
    code, out, err = check("vit-plain", *FAST, "--baseline", str(path))  # layers: the baseline's own
    assert code == 0 and err == ""
    assert "28 metrics compared — 0 regressed, 0 improved" in out  # 4 for X, 12 per layer (2 layers)


def test_a_regression_is_detected_and_an_improvement_is_not_flagged(
    tmp_path: Path, spectrum: dict[str, Any], cli: Callable[..., Result]
) -> None:
    old = copy.deepcopy(spectrum)
    old["embedding"]["kappa"]["median"] /= 1.5  # so the new κ(X) is a 50% regression
    old["layers"][1]["mu_la"]["median"] *= 3  # so the new μ(LA) of the last layer is a big improvement
    old["settings"]["seed"] = 7
    path = baseline_file(tmp_path, old)
    result = cli("check", "vit-plain", *FAST, "--baseline", str(path), "--json")
    assert result.exit_code == 1
    r = json.loads(result.stdout)
    failed = [c for c in r["checks"] if not c["passed"]]
    assert [c["metric"] for c in failed] == ["embedding.kappa"]
    now = spectrum["embedding"]["kappa"]["median"]
    assert failed[0]["value"] == now and failed[0]["baseline"] == old["embedding"]["kappa"]["median"]
    assert failed[0]["limit"] == pytest.approx(old["embedding"]["kappa"]["median"] * 1.1)
    assert failed[0]["reason"].startswith("regressed:")
    improved = [c for c in r["checks"] if c["improved"]]
    assert [c["metric"] for c in improved] == ["layers[5].mu_la"] and improved[0]["passed"] is True
    assert r["baseline"]["regressed"] == 1 and r["baseline"]["improved"] == 1
    assert r["warnings"] == ["the baseline's seed differs: 7 there, 0 now"]
    assert "warning: the baseline's seed differs: 7 there, 0 now" in result.stderr
    table = cli("check", "vit-plain", *FAST, "--baseline", str(path), "--tolerance", "60%")
    assert table.exit_code == 0  # 50% is within a 60% tolerance
    assert "1 improved by more than the tolerance (not flagged)" in table.stdout


def test_junit_from_a_real_run_has_the_right_counts(
    tmp_path: Path, spectrum: dict[str, Any], check: Check
) -> None:
    old = copy.deepcopy(spectrum)
    old["layers"][0]["kappa"]["median"] /= 2
    path = baseline_file(tmp_path, old)
    junit = tmp_path / "reports" / "condcli.xml"
    code, _, err = check(
        "vit-plain", *FAST, "--max-kappa", "100", "--max-mu-la", "1e15", "--baseline", str(path),
        "--junit", str(junit),
    )  # fmt: skip
    assert code == 1 and f"wrote {junit}" in err
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("30", "2", "0")
    rules, metrics = root.findall("testsuite")
    assert (rules.get("name"), rules.get("tests"), rules.get("failures")) == ("condcli check", "2", "1")
    assert (metrics.get("name"), metrics.get("tests"), metrics.get("failures")) == (
        "condcli baseline",
        "28",  # 4 for X, 12 per layer (2 layers)
        "1",
    )
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["max_kappa: κ(X)", "layers[0].kappa: κ(X_l)"]


def test_below_precision_x_fails_a_max_kappa_rule_with_that_reason(
    monkeypatch: pytest.MonkeyPatch, check_json: CheckJson
) -> None:
    """A real run on X whose second token nearly repeats the first: σ_k below float32 resolution."""
    real_load = sources.load

    def load(text: str, options: Any = None) -> Any:
        loaded = real_load(text, options)

        def near_repeat(m: Any, a: Any, o: torch.Tensor) -> torch.Tensor:
            o = o.clone()
            o[:, 1] = o[:, 0] * (1 + 1e-6)  # rank-one pair: σ_k ≈ 1e-6·|x_0|, finite but below float32 tol
            return o

        loaded.model.pos_drop.register_forward_hook(near_repeat)
        return loaded

    monkeypatch.setattr(sources, "load", load)
    code, r = check_json("vit-plain", *FAST, "--max-kappa", "1e15")
    c = r["checks"][0]
    assert code == 1 and c["value"] < 1e15 and r["embedding"]["kappa"]["inf_count"] == 0
    assert c["reason"] == (
        "X is below float32 resolution in 2 of 2 samples (its κ is a floor, not a measurement) "
        "— rerun with `dtype=float64`"
    )


def test_exit_3_on_an_internal_error_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import condcli.analysis.spectrum as module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "analyse_spectrum", broken)
    junit = tmp_path / "j.xml"
    assert main(["check", "vit-plain", *FAST, "--max-kappa", "100", "--junit", str(junit)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: internal error: RuntimeError: boom") and len(err.splitlines()) == 1
    assert not junit.exists()


BAD_JSON = "{not json"
V2 = '{"schema_version": 2, "command": "spectrum"}'


@pytest.mark.parametrize(
    ("files", "args", "text"),
    [
        ({}, [], "nothing to check: give a rule (--max-kappa F"),
        ({"b.json": BAD_JSON}, ["--baseline", "b.json"], "--baseline b.json: invalid JSON at line 1"),
        ({"b.json": V2}, ["--baseline", "b.json"], "--baseline b.json has schema_version 2"),
        ({"b.json": "[]"}, ["--baseline", "b.json"], "is not a condcli report"),
        ({}, ["--baseline", "none.json"], "--baseline none.json: no such file"),
        ({}, ["--max-kappa", "100", "--config", "none.toml"], "--config none.toml: no such file"),
        (
            {"c.toml": "[tool.condcli.check]\nmax_kapa = 3\n"},
            ["--config", "c.toml"],
            "unknown key 'max_kapa'",
        ),
        ({"pyproject.toml": "[tool.condcli.check]\nmax_kappa = 'x'\n"}, [], "must be a number, got 'x'"),
        ({"pyproject.toml": "[tool.condcli.check\n"}, [], "pyproject.toml: invalid TOML"),
        ({}, ["--max-kappa", "0.5"], "--max-kappa must be ≥ 1, got 0.5"),
        ({}, ["--max-kappa", "inf"], "--max-kappa must be a finite number"),
        ({}, ["--max-kappa", "abc"], "Invalid value for '--max-kappa'"),
        ({"b.json": "{}"}, ["--baseline", "b.json", "--tolerance", "-10%"], "--tolerance '-10%' must be"),
        ({}, ["--max-kappa", "100", "--statistic", "p90"], "--statistic 'p90' is not known"),
        ({}, ["--max-mu-la", "100", "--layers", "none"], "--max-mu-la needs layers"),
        ({"f": "x"}, ["--max-kappa", "100", "--junit", "f/j.xml"], "f is a file, not a folder"),
        ({}, ["--max-kappa", "100", "vit-conditioned", "--lambda", "5"], "would measure another shift"),
    ],
)
def test_bad_usage_or_input_is_one_line_and_exit_2(
    files: dict[str, str],
    args: list[str],
    text: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["check", *FAST, *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_a_model_that_conditions_itself_is_gated_on_what_its_blocks_see(check_json: CheckJson) -> None:
    code, r = check_json(
        "vit-conditioned", *FAST, "--layers", "0", "--max-kappa", "30", "--max-kappa-layer", "30"
    )
    assert code == 0
    kappa, layer = r["checks"][0], r["checks"][1]
    assert kappa["metric"] == "embedding.kappa_conditioned"
    assert kappa["label"] == "κ(X + 1·I_k), the model's own shift"
    assert kappa["value"] == r["embedding"]["kappa_conditioned"]["median"]
    assert r["embedding"]["kappa"]["median"] > 100  # X before the model's own shift
    # block 0's input is X + 1·I_k, read by the layer capture (an independent path to the same matrix)
    assert layer["value"] == pytest.approx(kappa["value"], rel=1e-5)


def test_a_check_report_serves_as_a_baseline(
    tmp_path: Path, cli: Callable[..., Result], check_json: CheckJson
) -> None:
    result = cli("check", "vit-plain", *FAST, "--max-kappa", "1000", "--json")
    path = baseline_file(tmp_path, json.loads(result.stdout), "check.json")
    code, r = check_json("vit-plain", *FAST, "--baseline", str(path))
    assert code == 0 and r["baseline"]["compared"] == 4 and r["warnings"] == []
