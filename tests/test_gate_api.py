"""condcli.gate.check and condcli.gate.compare called as a library (no Typer): each report is byte for byte
what the CLI prints with --json for the same inputs, a saved report gates like the model it came from, and
a library error names the Python parameter where the CLI names its flag."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from condcli import gate
from condcli.cli.main import error_line
from condcli.errors import CondcliError, InputError, UsageError

FAST = ["--max-samples", "2", "--batch-size", "2"]
RUN: dict[str, Any] = {"max_samples": 2, "batch_size": 2}


@pytest.fixture(autouse=True)
def _apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both the CLI and the library read ./pyproject.toml: an empty folder has none."""
    monkeypatch.chdir(tmp_path)


def printed(report: gate.CheckReport | gate.CompareReport) -> str:
    """What ``--json`` prints for ``report``."""
    return json.dumps(report.to_json(), indent=2) + "\n"


def cli_stdout(cli: Callable[..., Result], *args: str, code: int = 0) -> str:
    result = cli(*args, "--json")
    assert result.exit_code == code, result.output
    return result.stdout


def test_check_is_the_clis_report_byte_for_byte(cli: Callable[..., Result]) -> None:
    shown = cli_stdout(cli, "check", "vit-plain", *FAST, "--max-kappa", "200", "--max-mu-la", "3", code=1)
    report = gate.check("vit-plain", limits={"max_kappa": 200, "max_mu_la": 3}, **RUN)
    assert printed(report) == shown
    assert not report.passed and [c.passed for c in report.rules] == [True, False]
    assert report.spectrum is not None and report.spectrum.model.spec == "vit-plain"


def test_check_against_a_baseline_file_or_its_json(cli: Callable[..., Result], tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(cli_stdout(cli, "spectrum", "vit-plain", *FAST), encoding="utf-8")
    shown = cli_stdout(cli, "check", "vit-plain", *FAST, "--baseline", str(path), "--tolerance", "1%")
    from_file = gate.check("vit-plain", baseline=path, tolerance="1%", **RUN)
    assert printed(from_file) == shown and from_file.passed
    given = gate.check("vit-plain", baseline=json.loads(path.read_text()), tolerance=0.01, **RUN)
    assert given.baseline is not None and given.baseline.path is None
    assert [(c.metric, c.value, c.limit, c.passed) for c in given.checks] == [
        (c.metric, c.value, c.limit, c.passed) for c in from_file.checks
    ]
    assert {c.source for c in given.checks} == {"the baseline given"}


def test_a_saved_report_is_checked_as_its_model_was(cli: Callable[..., Result]) -> None:
    """The check report the CLI printed, checked again by the library, is the same report."""
    shown = cli_stdout(cli, "check", "vit-plain", *FAST, "--max-kappa", "200", "--max-kappa-layer", "1e9")
    again = gate.check(json.loads(shown), limits={"max_kappa": 200, "max_kappa_layer": 1e9})
    assert printed(again) == shown and again.spectrum is None


def test_compare_is_the_clis_report_byte_for_byte(cli: Callable[..., Result]) -> None:
    shown = cli_stdout(cli, "compare", "vit-plain", "vit-conditioned", *FAST, "--layers", "0,-1")
    report = gate.compare("vit-plain", "vit-conditioned", layers="0,-1", **RUN)
    assert printed(report) == shown
    assert report.rows[0].key == "embedding.seen" and report.rows[1].ratio == pytest.approx(
        report.rows[1].b / report.rows[1].a, rel=1e-15
    )
    saved = json.loads(shown)  # the two analyses it holds, compared again without a model
    assert printed(gate.compare(saved["a"], saved["b"])) == shown


def _raised(call: Callable[[], object]) -> CondcliError:
    with pytest.raises(CondcliError) as e:
        call()
    return e.value


@pytest.mark.parametrize(
    ("call", "python", "args", "shown"),
    [
        (
            lambda: gate.check("vit-plain", limits={"max_kappa_layer": 10}, layers="none", **RUN),
            "max_kappa_layer needs layers, but layers=none analyses none — drop layers=none",
            ["check", "vit-plain", "--max-kappa-layer", "10", "--layers", "none"],
            "--max-kappa-layer needs layers, but --layers none analyses none — drop --layers none",
        ),
        (
            lambda: gate.check("vit-conditioned", limits={"max_kappa": 100}, lam=3, **RUN),
            "max_kappa gates what the blocks see, and this model adds X + 1·I_k at X itself: lam=3 would "
            "measure another shift — drop lam",
            ["check", "vit-conditioned", *FAST, "--max-kappa", "100", "--lambda", "3"],
            "--max-kappa gates what the blocks see, and this model adds X + 1·I_k at X itself: --lambda 3 "
            "would measure another shift — drop --lambda",
        ),
        (
            lambda: gate.check("vit-plain", limits={"max_kappa": 0.5}),
            "max_kappa must be ≥ 1, got 0.5 — a condition number is never below 1, so such a limit could "
            "never pass",
            ["check", "vit-plain", "--max-kappa", "0.5"],
            "--max-kappa must be ≥ 1, got 0.5 — a condition number is never below 1, so such a limit could "
            "never pass",
        ),
        (
            lambda: gate.compare(
                "vit-plain", "vit-plain", checkpoint_a=Path("x.pt"), checkpoint=Path("x.pt")
            ),
            "A and B are both vit-plain with checkpoint=x.pt — give model_a model_b, model_b alone to "
            "compare it with [tool.condcli] model, or two checkpoints of one model with checkpoint_a=FILE "
            "checkpoint=FILE",
            ["compare", "vit-plain", "vit-plain", "--checkpoint-a", "x.pt", "--checkpoint", "x.pt"],
            "A and B are both vit-plain with --checkpoint x.pt — give MODEL_A MODEL_B, MODEL_B alone to "
            "compare it with [tool.condcli] model, or two checkpoints of one model with --checkpoint-a FILE "
            "--checkpoint FILE",
        ),
        (
            lambda: gate.compare("vit-plain", "vit-conditioned", statistic="mode"),
            "statistic 'mode' is not known — use one of median, mean, max",
            ["compare", "vit-plain", "vit-conditioned", "--statistic", "mode"],
            "--statistic 'mode' is not known — use one of median, mean, max",
        ),
    ],
    ids=["layers-none", "own-lambda", "limit", "same-model", "statistic"],
)
def test_a_library_error_names_the_parameter_and_the_cli_its_flag(
    cli: Callable[..., Result], call: Callable[[], object], python: str, args: list[str], shown: str
) -> None:
    error = _raised(call)
    assert str(error) == python and "--" not in str(error)
    assert error_line(error) == shown
    result = cli(*args)
    assert result.exit_code == error.exit_code == 2
    assert result.stderr.strip() == f"error: {shown}"


def test_nothing_to_check_names_every_rule_as_a_parameter() -> None:
    error = _raised(lambda: gate.check("vit-plain"))
    assert isinstance(error, UsageError) and str(error).startswith(
        "nothing to check: give a rule (max_kappa=F, max_kappa_distinct=F, max_kappa_table=F, "
    )
    assert "baseline=FILE" in str(error) and "--" not in str(error)
    assert error_line(error).startswith(
        "nothing to check: give a rule (--max-kappa F, --max-kappa-distinct F, --max-kappa-table F, "
    )


def test_a_saved_report_takes_no_run_options_and_must_be_a_report() -> None:
    error = _raised(lambda: gate.check({"command": "spectrum"}, limits={"max_kappa": 200}, max_samples=2))
    assert str(error) == "max_samples is an option of a run, and model is a saved report — drop it"
    error = _raised(lambda: gate.check({"command": "spectrum"}, limits={"max_kappa": 200}))
    assert isinstance(error, InputError) and str(error).startswith("model has no schema_version")
    error = _raised(lambda: gate.check("vit-plain", limits={"max_kapa": 200}))
    assert str(error).startswith("no rule is called 'max_kapa' — the rules: max_kappa, ")
