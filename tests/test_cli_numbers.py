"""Option values at their limits (issue 17, items 7, 10 and 20): λ of any size, the sweep grid's maximum, the
seed range, an empty MODEL, and hostile TOML/JSON in the project config, an --adapter file and --model-arg.

References are independent of condcli: NumPy's κ of the shifted matrix, the seeded libraries themselves.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result

from condcli.analysis.common import check_lambda
from condcli.analysis.sweep import MAX_GRID, lambda_grid
from condcli.cli.options import MAX_SEED, RunOptions
from condcli.errors import InputError, UsageError
from condcli.loading.factory import parse_model_args
from condcli.loading.project_config import resolve_model

FAST = ("--max-samples", "2", "--layers", "none")
DEEP = "[" * 5000 + "]" * 5000


def _one_line(result: Result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("model", ["", "   "])
def test_an_empty_model_is_refused_not_read_as_the_default(model: str, cli: Callable[..., Result]) -> None:
    line = _one_line(cli("check", model, "--max-kappa", "1e9", *FAST))
    assert "MODEL is empty" in line and "unset variable" in line
    with pytest.raises(UsageError, match="model is empty"):
        resolve_model(model)


def test_no_model_still_means_the_default(tmp_path: Path) -> None:
    assert resolve_model(None, tmp_path / "pyproject.toml")[0] == "vit-plain"


def test_a_huge_lambda_gives_numpys_kappa_of_the_shifted_matrix(
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    # |X| ≪ 1e180 here, so X + λ·I_k is λ·I_k in float64: NumPy's κ of it is the reference
    # (docs/math.md#spectra: the Gram path agrees with float64 SVD to 1e-10)
    report = cli_json("spectrum", "--lambda", "1e200", *FAST)
    N, d = report["inputs"]["tokens"], report["inputs"]["dim"]
    ref = float(np.linalg.cond(1e200 * np.eye(N, d)))
    assert report["settings"]["lambda"] == 1e200
    assert report["embedding"]["kappa_conditioned"]["per_sample"] == pytest.approx([ref, ref], rel=1e-10)
    sweep = cli_json("sweep-lambda", "--lambdas", "1,1.5e154,1e300", *FAST)["sweep"]
    assert sweep["lambdas"] == [1.0, 1.5e154, 1e300]
    assert sweep["kappa"]["median"][1:] == pytest.approx([ref, ref], rel=1e-10)
    assert sweep["kappa"]["median"][0] > 1  # λ = 1 leaves X's conditioning visible


@pytest.mark.parametrize(("command", "flag"), [("spectrum", "--lambda"), ("rank-decay", "--conditioned")])
def test_a_lambda_that_overflows_the_conditioned_forward_is_named(
    command: str, flag: str, cli: Callable[..., Result]
) -> None:
    line = _one_line(cli(command, flag, "1e30", "--max-samples", "1"))
    assert "X + 1e+30·I_k" in line and "NaN/Inf in float32" in line and "overflows the model" in line
    assert "--dtype float64" in line


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_rank_decay_conditioned_is_checked_as_itself(value: str, cli: Callable[..., Result]) -> None:
    line = _one_line(cli("rank-decay", "--conditioned", value, "--max-samples", "1"))
    assert line.startswith("error: --conditioned must be a finite number ≥ 0") and "--lambda" not in line


def test_minus_zero_is_zero() -> None:
    assert np.copysign(1.0, check_lambda(-0.0)) == 1.0
    assert np.copysign(1.0, lambda_grid((-0.0, 1.0), 3, None)[0]) == 1.0
    assert np.copysign(1.0, lambda_grid(None, None, [-0.0, 1.0])[0]) == 1.0


def test_the_sweep_grid_is_capped_before_it_is_built(cli: Callable[..., Result]) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(UsageError, match=f"at most {MAX_GRID}"):
        lambda_grid(None, 100_000_000, None)
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 1 and peak < 1 << 20  # nothing of the 800 MB grid was allocated
    assert len(lambda_grid((0.0, 1.0), MAX_GRID, None)) == MAX_GRID
    with pytest.raises(UsageError, match="lambdas asks for"):
        lambda_grid(None, None, list(range(MAX_GRID + 1)))
    assert "--steps asks for 100000000" in _one_line(cli("sweep-lambda", "--steps", "100000000"))
    help_text = " ".join(cli("sweep-lambda", "--help").stdout.split())
    assert f"at most {MAX_GRID}" in help_text


def test_a_range_too_narrow_for_its_steps_is_refused() -> None:
    with pytest.raises(UsageError, match="too narrow"):
        lambda_grid((1.0, float(np.nextafter(1.0, 2.0))), 5, None)


def test_the_seed_range_is_what_every_seeded_library_takes(cli: Callable[..., Result]) -> None:
    torch.manual_seed(MAX_SEED)
    torch.Generator().manual_seed(MAX_SEED)
    np.random.default_rng([MAX_SEED, 7])
    np.random.seed(MAX_SEED)  # noqa: NPY002 - the legacy API is the one that bounds the range
    with pytest.raises(ValueError):
        np.random.seed(MAX_SEED + 1)  # noqa: NPY002
    with pytest.raises(ValueError):
        np.random.default_rng([-1, 0])
    for bad in (-1, MAX_SEED + 1, 2**64):
        with pytest.raises(UsageError, match="seed"):
            RunOptions(seed=bad)
        line = _one_line(cli("spectrum", "--seed", str(bad), *FAST))
        assert f"--seed must be between 0 and {MAX_SEED}" in line
    assert RunOptions(seed=MAX_SEED).seed == MAX_SEED
    assert str(MAX_SEED) in " ".join(cli("spectrum", "--help").stdout.split())


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"[tool.condcli]\nmodel_args = {{ depth = {DEEP} }}\n", "nested too deeply"),
        ("[tool.condcli]\nmodel = " + "9" * 5000 + "\n", "integer with thousands of digits"),
        ("tool = 5\n", "is not a table"),
    ],
)
def test_hostile_project_config_is_one_line_naming_it(
    text: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Result]
) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    line = _one_line(cli("spectrum", *FAST))
    assert says in line and "pyproject.toml" in line


def test_hostile_adapter_toml_is_one_line_naming_it(tmp_path: Path, cli: Callable[..., Result]) -> None:
    file = tmp_path / "a.toml"
    file.write_text(f"input = {DEEP}\n")
    line = _one_line(cli("spectrum", "tests.toy_models:toy_factory", "--adapter", str(file), *FAST))
    assert f"--adapter {file}: it is nested too deeply" in line


def test_model_arg_literals_parse_as_json_and_hostile_ones_are_refused() -> None:
    plain = ["a=4", "b=tiny", "c=[2, 4]", 'd="4"', "e=1e-3", "f=true"]
    assert parse_model_args(plain) == {k: v for k, v in (json_or_text(p) for p in plain)}
    for value, says in ((DEEP, "nested too deeply"), ("7" * 5000, "thousands of digits")):
        with pytest.raises(InputError, match=says) as info:
            parse_model_args([f"depth={value}"])
        assert info.value.params == ("model_args",)


def json_or_text(item: str) -> tuple[str, Any]:
    key, _, value = item.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def test_an_overflowing_correction_is_not_blamed_on_lambda() -> None:
    from condcli.analysis.common import conditioned_overflow
    from condcli.conditioning import Conditioning

    line = str(conditioned_overflow(Conditioning(mode="correction"), torch.float32))
    assert "X + C (Theorem 4.4)" in line and "the correction overflows" in line and "λ" not in line
