"""`condcli sweep-lambda` end to end: default MODEL and grid, JSON contract, numbers against NumPy, the
recommendation, --layers, one-line errors before any work, and atomic --out."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result

from condcli.cli import main
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import load
from tests.helpers import np_kappa, np_sigma

VIT = ["vit-plain", "--max-samples", "4", "--batch-size", "3"]

AGG_KEYS = {"median", "mean", "min", "max", "per_sample", "inf_count"}


@pytest.fixture(autouse=True)
def _in_tmp_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml here: MODEL defaults to the shipped sample ViT


def numpy_kappa(lambdas: list[float], max_samples: int) -> np.ndarray:
    """(S, L) κ(X + λ·eye) with X from timm's own embedding code of vit-plain, NumPy float64 SVD."""
    loaded = load("vit-plain")
    m: Any = loaded.model
    xs = []
    with torch.no_grad():
        for batch in stream(loaded.preprocessing, InputSpec(max_samples=max_samples)):
            xs.extend(m._pos_embed(m.patch_embed(batch.inputs["pixel_values"])).double().numpy())
    return np.array([[float(np_kappa(x + lam * np.eye(*x.shape))) for lam in lambdas] for x in xs])


def test_no_model_and_no_grid_is_the_sample_vit_over_1_to_20(
    cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    data = cli_json("sweep-lambda", "--max-samples", "2")
    assert data["model"]["spec"] == "vit-plain" and "default" in data["model"]["from"]
    assert data["sweep"]["lambdas"] == [float(v) for v in range(1, 21)]
    result = cli("sweep-lambda", "--range", "1", "20", "--max-samples", "2")
    assert result.exit_code == 0, result.output
    assert "vit-plain (the shipped sample ViT (default))" in result.stdout
    assert "recommended: λ = " in result.stdout and "Weyl λ for the target" in result.stdout


def test_json_contract_and_numbers_equal_numpy(cli_json: Callable[..., dict[str, Any]]) -> None:
    lams = [0.5, 3.0, 8.0, 12.0, 25.0]
    data = cli_json("sweep-lambda", *VIT, "--lambdas", "25,12,3,0.5,8,3")  # unsorted, with a duplicate
    for key in ("schema_version", "tool", "command", "model", "inputs", "settings", "embedding", "sweep"):
        assert key in data
    assert data["schema_version"] == 1 and data["command"] == "sweep-lambda"
    assert set(data["model"]) >= {"spec", "family", "source", "weights", "num_layers"}
    assert set(data["inputs"]) >= {"kind", "count", "tokens", "dim"}
    assert data["inputs"]["count"] == 4 and data["inputs"]["tokens"] == 65 and data["inputs"]["dim"] == 96
    assert (
        set(data["settings"]) >= {"lambda", "dtype", "device", "seed"}
        and data["settings"]["target_kappa"] == 2
    )
    emb = data["embedding"]
    for key in ("kappa_conditioned", "kappa_corrected", "sigma_max", "numerical_rank"):
        assert set(emb[key]) == AGG_KEYS
    # σ_min: 0 or "< tol" where not measured (docs/math.md#spectra-below-resolution)
    ceiling = {"ceiling_count", "ceiling", "per_sample_ceiling", "zero_count", "per_sample_zero", "reason"}
    assert set(emb["sigma_min"]) == AGG_KEYS | ceiling
    # docs/math.md#spectra floors
    assert set(emb["kappa"]) >= AGG_KEYS | {"floor_count", "floor", "per_sample_floor"}
    assert "spectrum" not in emb and isinstance(emb["below_precision"], int)
    s = data["sweep"]
    assert set(s) >= {
        "lambdas",
        "kappa",
        "weyl_bound",
        "supplement_estimate",
        "weyl_lambda_for_target",
        "kappa_corrected",
        "kappa_plain",
        "recommended_lambda",
        "target_kappa",
        "layers",
    }
    assert s["lambdas"] == lams and set(s["kappa"]) == {"median", "p10", "p90", "inf_count"}
    kappa = numpy_kappa(lams, 4)
    for name, q in (("median", 50), ("p10", 10), ("p90", 90)):
        np.testing.assert_allclose(s["kappa"][name], np.percentile(kappa, q, axis=0), rtol=1e-9, atol=0)
    assert s["kappa"]["inf_count"] == [0] * 5
    s1 = np.array(emb["sigma_max"]["per_sample"])[:, None]
    lam = np.array(lams)[None]
    weyl = np.where(lam > s1, (s1 + lam) / np.abs(lam - s1), np.inf)
    got = [np.inf if v == "inf" else v for v in s["weyl_bound"]]
    np.testing.assert_allclose(got, np.median(weyl, axis=0), rtol=1e-9)
    assert s["weyl_bound"][0] == "inf"  # λ = 0.5 ≤ σ_1: no bound, written as the string "inf"
    med = np.median(kappa, axis=0)
    assert s["recommended_lambda"] == lams[int(np.nonzero(med <= 2)[0][0])]
    assert s["layers"] is None


def test_sigma_in_the_report_is_numpys(cli_json: Callable[..., dict[str, Any]]) -> None:
    data = cli_json("sweep-lambda", "--max-samples", "2", "--lambdas", "10")
    loaded = load("vit-plain")
    m: Any = loaded.model
    (batch,) = stream(loaded.preprocessing, InputSpec(max_samples=2))
    with torch.no_grad():
        x = m._pos_embed(m.patch_embed(batch.inputs["pixel_values"])).double().numpy()
    np.testing.assert_allclose(data["embedding"]["sigma_max"]["per_sample"], np_sigma(x)[:, 0], rtol=1e-9)


def test_target_out_of_reach_is_null_and_the_table_says_what_to_do(
    cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    data = cli_json("sweep-lambda", *VIT, "--range", "0.001", "0.002", "--steps", "3")
    assert data["sweep"]["lambdas"] == [0.001, 0.0015, 0.002]
    assert data["sweep"]["recommended_lambda"] is None
    result = cli("sweep-lambda", *VIT, "--range", "0.001", "0.002", "--steps", "3")
    assert result.exit_code == 0, result.output
    assert "none in range" in result.stdout and "widen the range" in result.stdout
    assert "e.g. --range " in result.stdout and "value_range" not in result.stdout  # the report's parameter
    assert "Weyl λ for the target" in result.stdout


def test_layers_add_one_column_and_one_entry_each(
    cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    data = cli_json("sweep-lambda", *VIT, "--lambdas", "1,10", "--layers", "0,-1")
    layers = data["sweep"]["layers"]
    assert [layer["index"] for layer in layers] == [0, 5]
    for layer in layers:
        assert {"index", "name", "kappa_median", "kappa_plain_median"} <= set(layer)
        assert len(layer["kappa_median"]) == 2
    # layer 0 sees X + λI_k in float32: its κ is the sweep's κ(X + λI_k)
    np.testing.assert_allclose(layers[0]["kappa_median"], data["sweep"]["kappa"]["median"], rtol=1e-5)
    result = cli("sweep-lambda", *VIT, "--lambdas", "1,10", "--layers", "0,-1")
    assert result.exit_code == 0 and "κ(X_0) blocks.0" in result.stdout and "κ(X_5) blocks.5" in result.stdout


BAD = [
    (["--range", "1", "20", "--lambdas", "1,2"], "--range and --lambdas"),
    (["--range", "-1", "20"], "--range"),
    (["--lambdas", "1,-2"], "--lambdas"),
    (["--range", "20", "1"], "--range"),
    (["--range", "5", "5"], "--range"),
    (["--range", "1", "20", "--steps", "0"], "--steps"),
    (["--range", "1", "20", "--steps", "1"], "--steps"),
    (["--lambdas", "1,two"], "--lambdas"),
    (["--lambdas", "1,,2"], "--lambdas"),
    (["--lambdas", "1,inf"], "--lambdas"),
    (["--range", "1", "nan"], "--range"),
    (["--range", "1"], "--range"),
    (["--target-kappa", "1"], "--target-kappa"),
    (["--target-kappa", "0.5"], "--target-kappa"),
    (["--layers", "1,x"], "--layers"),
    (["--format", "gif"], "--format"),
]


@pytest.mark.parametrize(("args", "flag"), BAD)
def test_bad_usage_is_one_line_exit_2_before_loading(
    args: list[str], flag: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_load(*a: Any, **k: Any) -> None:
        raise AssertionError("the model was loaded before the usage error")

    monkeypatch.setattr("condcli.loading.sources.load", no_load)
    assert main(["sweep-lambda", *args]) == 2
    err = capsys.readouterr().err
    assert flag in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["vit-plain", "--layers", "6"], "--layers asks for a layer"),
        (["vit-plain", "--layers", "0,-7"], "--layers asks for a layer"),
        (["vit-conditioned", "--layers", "0"], "already is the conditioned one"),
        (["vit-conditioned", "--layers", "all"], "--layers"),
    ],
)
def test_bad_layers_are_refused_before_any_forward_pass(
    args: list[str], text: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_forward(*a: Any, **k: Any) -> None:
        raise AssertionError("a forward pass ran before the --layers error")

    monkeypatch.setattr("condcli.analysis.driver.capture", no_forward)
    assert main(["sweep-lambda", *args, "--max-samples", "1"]) == 2
    err = capsys.readouterr().err
    assert text in err and err.count("\n") == 1 and "Traceback" not in err


def test_out_under_a_file_is_exit_2_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["sweep-lambda", *VIT, "--out", str(blocker / "sub")]) == 2
    assert "--out" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before and blocker.read_text() == "x"


def test_out_writes_the_json_report_and_the_plot(
    tmp_path: Path, cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    args = [*VIT, "--lambdas", "2,10", "--layers", "0"]
    data = cli_json("sweep-lambda", *args)
    out = tmp_path / "run"
    result = cli("sweep-lambda", *args, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads((out / "report.json").read_text()) == data
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    names = [".condcli-manifest.json", "report.html", "report.json", "sweep.png"]
    assert sorted(p.name for p in out.iterdir()) == names
