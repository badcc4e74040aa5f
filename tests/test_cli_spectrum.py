"""`condcli spectrum` end to end through the CLI: exit codes, docs/math.md#json JSON keys, the table, --out
files written whole or not at all, and one clear line for each kind of bad input.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from PIL import Image

from condcli.loading.samples import sample_names
from tests.helpers import np_kappa

FAST = ["--max-samples", "2", "--batch-size", "2"]
AGG_KEYS = {"median", "mean", "min", "max", "per_sample", "inf_count"}
FLOOR_KEYS = {"floor_count", "floor", "per_sample_floor", "rel_uncertainty"}
CEILING_KEYS = {"ceiling_count", "ceiling", "per_sample_ceiling", "zero_count", "per_sample_zero", "reason"}
BAND_MARKS = {
    "resolution",
    "unresolved_from",
    "zero_from",
    "unresolved_count",
    "zero_count",
    "unresolved_reason",
}


def test_json_has_every_spec_key(cli_json: Callable[..., dict[str, Any]]) -> None:
    r = cli_json("spectrum", "vit-plain", *FAST)
    assert r["schema_version"] == 1 and r["command"] == "spectrum" and r["tool"]["name"] == "condcli"
    assert {"spec", "family", "source", "weights", "num_layers"} <= set(r["model"])
    assert {"kind", "count", "tokens", "dim"} <= set(r["inputs"])
    assert {"lambda", "dtype", "device", "seed"} <= set(r["settings"])
    e = r["embedding"]
    for key in ("kappa_conditioned", "kappa_corrected", "sigma_max", "sigma_min", "numerical_rank"):
        marks = (
            CEILING_KEYS if key == "sigma_min" else set()
        )  # 0 or "< tol" (docs/math.md#spectra-below-resolution)
        assert set(e[key]) == AGG_KEYS | marks, key
    # κ(X) may be a floor (docs/math.md#spectra): marked per sample
    assert set(e["kappa"]) == AGG_KEYS | FLOOR_KEYS
    assert isinstance(e["below_precision"], int) and e["where"] == "pos_drop"
    for key in ("spectrum", "spectrum_conditioned"):
        assert set(e[key]) == {"median", "p10", "p90", *BAND_MARKS} and len(e[key]["median"]) == 65
    assert len(r["layers"]) == r["model"]["num_layers"] == 6
    for layer in r["layers"]:
        assert {"index", "name", "kappa", "kappa_attn_input", "kappa_wq", "kappa_wk", "kappa_wv"} <= set(
            layer
        )
        assert set(layer["mu_la"]) == AGG_KEYS | FLOOR_KEYS and set(layer["mu_a"]) == AGG_KEYS | FLOOR_KEYS
        assert set(layer["conditioned"]) >= {"kappa", "kappa_attn_input", "mu_la", "mu_a"}
    assert r["inputs"]["count"] == 2 and r["settings"]["lambda"] == 10


def test_no_model_uses_the_shipped_sample_and_says_so(
    cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    r = cli_json("spectrum", *FAST, "--layers", "none")
    assert r["model"]["spec"] == "vit-plain" and "default" in r["model"]["from"]
    table = cli("spectrum", *FAST, "--layers", "none")
    assert table.exit_code == 0 and "vit-plain (the shipped sample ViT (default))" in table.stdout


def test_json_numbers_equal_numpy_on_the_hooked_x(cli_json: Callable[..., dict[str, Any]]) -> None:
    """The CLI's κ(X), κ(X + λI_k) and spectrum against NumPy on X captured by the test's own hook."""
    import torch

    from condcli.inputs.batches import InputSpec, stream
    from condcli.loading.sources import LoadOptions, load

    r = cli_json("spectrum", "vit-plain", *FAST, "--lambda", "3.5", "--layers", "none")
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    seen: list[torch.Tensor] = []
    h = loaded.model.pos_drop.register_forward_hook(lambda m, a, o: seen.append(o.detach()))
    with torch.no_grad():
        loaded.model(batch.inputs["pixel_values"])
    h.remove()
    X = seen[0].double().numpy()
    e = r["embedding"]
    np.testing.assert_allclose(e["kappa"]["per_sample"], np_kappa(X), rtol=1e-9)
    np.testing.assert_allclose(
        e["kappa_conditioned"]["per_sample"], np_kappa(X + 3.5 * np.eye(65, 96)), rtol=1e-9
    )
    sigma = np.linalg.svd(X, compute_uv=False)
    np.testing.assert_allclose(e["spectrum"]["median"], np.median(sigma, 0), rtol=1e-9)
    assert r["settings"]["lambda"] == 3.5


def test_table_shows_x_layers_and_the_conditioned_forward(cli: Callable[..., Result]) -> None:
    result = cli("spectrum", "vit-plain", *FAST, "--layers", "0,-1", "--heads")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("κ(X)", "κ(X + 10·I_k)", "κ(X + C)", "numerical rank", "μ(LA)", "μ(A)", "μ(LA) +10I"):
        assert text in out, text
    assert "0 blocks.0" in out and "5 blocks.5" in out and "1 blocks.1" not in out
    assert "per head" in out and "κ(LA) actual" in out
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize("name", sorted(sample_names()))
def test_every_shipped_sample_runs(name: str, cli_json: Callable[..., dict[str, Any]]) -> None:
    r = cli_json("spectrum", name, *FAST)
    assert r["inputs"]["count"] == 2
    emb = r["embedding"]
    for kappa, distinct, rows, kd in zip(
        emb["kappa"]["per_sample"],
        emb["distinct_rows"]["per_sample"],
        emb["rows"]["per_sample"],
        emb["kappa_distinct"]["per_sample"],
        strict=True,
    ):  # κ(X) is finite, or inf exactly where a token repeats in X without positions (llama-docstrings)
        assert np.isfinite(kd) and (
            (kappa == "inf" and distinct < rows) or (kappa != "inf" and np.isfinite(kappa))
        )
    if r["embedding"]["model_conditioning"]:
        assert r["conditioned_forward"]["applied"] is False
        assert all(layer["conditioned"] is None for layer in r["layers"])
    else:
        assert all(layer["conditioned"] is not None for layer in r["layers"])


def test_out_writes_the_report_and_plots(tmp_path: Path, cli: Callable[..., Result]) -> None:
    out = tmp_path / "new" / "run"
    result = cli("spectrum", "vit-plain", *FAST, "--out", str(out), "--format", "svg", "--json")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        ".condcli-manifest.json",
        "layers.svg",
        "report.html",
        "report.json",
        "spectrum.svg",
    ]
    assert json.loads((out / "report.json").read_text()) == json.loads(result.stdout)
    assert "wrote" in result.stderr


def test_a_failure_while_writing_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Result]
) -> None:
    def broken(figures: Any, folder: Path, fmt: str, style: str = "default") -> list[Path]:
        (folder / "spectrum.png").write_bytes(b"half")
        raise RuntimeError("disk full")

    import condcli.plots.base

    monkeypatch.setattr(condcli.plots.base, "write_figures", broken)  # the one writer saves figures here
    result = cli("spectrum", "vit-plain", *FAST, "--out", str(tmp_path))
    assert result.exit_code != 0
    assert list(tmp_path.iterdir()) == []  # neither report.json nor the half plot, nor the staging folder


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["vit-plian"], "unknown model 'vit-plian' — did you mean vit-plain?"),
        (["vit-plain", "--layers", "7"], "--layers asks for a layer this model does not have (6 layers"),
        (["vit-plain", "--layers", "-7"], "--layers asks for a layer"),
        (["vit-plain", "--layers", "one"], "--layers 'one' is not"),
        (["vit-plain", "--format", "gif"], "--format 'gif' is not known"),
        (["vit-plain", "--lambda", "-1"], "--lambda must be a finite number ≥ 0"),
        (["vit-plain", "--batch-size", "0"], "--batch-size must be at least 1"),
        (["vit-plain", "--text", "x.txt"], "--text was given for an image model"),
        (["gpt2-docstrings", "--images", "."], "--images was given for a text model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], text: str, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "out"
    result = cli("spectrum", *args, "--max-samples", "2", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert text in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()  # nothing written, not even the folder


def test_empty_image_folder_is_one_line(tmp_path: Path, cli: Callable[..., Result]) -> None:
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "notes.txt").write_text("not an image")
    result = cli("spectrum", "vit-plain", "--images", str(tmp_path / "imgs"), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and "no usable input" in result.stderr
    assert not (tmp_path / "o").exists()


def test_real_images_are_used(tmp_path: Path, cli_json: Callable[..., dict[str, Any]]) -> None:
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    r = cli_json("spectrum", "vit-plain", "--images", str(tmp_path), "--layers", "none")
    assert r["inputs"]["kind"] == "images" and r["inputs"]["count"] == 3


def test_unwritable_out_is_refused_before_any_work(tmp_path: Path, cli: Callable[..., Result]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = cli("spectrum", "vit-plain", *FAST, "--out", str(blocker / "sub"))
    assert result.exit_code == 2 and "is a file, not a folder" in result.stderr
    assert blocker.read_text() == "x"
