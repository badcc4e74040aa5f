"""`condcli rank-decay` end to end: docs/math.md#json JSON keys, numbers against NumPy on the hooked P, the
table, the two charts drawn from the JSON, --out written whole or not at all, and one line for each bad
input."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result
from matplotlib.collections import PolyCollection

from condcli import plots
from tests.helpers import np_cumulative
from tests.recording import vit_probs

FAST = ["--max-samples", "2", "--batch-size", "2"]
AGG_KEYS = {"median", "mean", "min", "max", "per_sample", "inf_count"}
# docs/math.md#spectra
KAPPA_KEYS = AGG_KEYS | {"floor", "floor_count", "per_sample_floor", "rel_uncertainty"}


@pytest.fixture(scope="module")
def vit_json(cli_json: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    return cli_json("rank-decay", "vit-plain", *FAST, "--conditioned", "10", "--heads")


def test_json_has_every_spec_key(vit_json: dict[str, Any]) -> None:
    r = vit_json
    assert r["schema_version"] == 1 and r["command"] == "rank-decay" and r["tool"]["name"] == "condcli"
    assert {"spec", "family", "source", "weights", "num_layers"} <= set(r["model"])
    assert {"kind", "count", "tokens", "dim"} <= set(r["inputs"])
    assert {"lambda", "dtype", "device", "seed"} <= set(r["settings"]) and r["settings"]["lambda"] == 10
    assert set(r["embedding"]["kappa"]) == KAPPA_KEYS
    for key in ("rank_decay", "rank_decay_conditioned"):
        rd = r[key]
        assert rd["index_m"] == 16 and rd["threshold"] == 0.9 and len(rd["layers"]) == 6
        for layer in rd["layers"]:
            assert {"index", "cumulative", "heads_at_m", "rank90", "erank"} <= set(layer)
            assert (
                set(layer["cumulative"]) >= {"median", "p10", "p90"}
                and len(layer["cumulative"]["median"]) == 65
            )
            assert AGG_KEYS <= set(layer["rank90"]) and AGG_KEYS <= set(layer["erank"])
            assert len(layer["heads_at_m"]) == layer["heads"] == 4 and len(layer["heads_detail"]) == 4
    assert r["conditioned_forward"]["applied"] is True


def test_json_numbers_equal_numpy_on_the_hooked_p(vit_json: dict[str, Any]) -> None:
    from condcli.inputs.batches import InputSpec, stream
    from condcli.loading.sources import LoadOptions, load

    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    for key, shift in (("rank_decay", None), ("rank_decay_conditioned", 10.0)):
        P = vit_probs(loaded, batches, shift)
        for layer, p in zip(vit_json[key]["layers"], P, strict=True):
            c = np_cumulative(p)  # (S, H, n)
            np.testing.assert_allclose(
                layer["cumulative"]["median"], np.median(c.reshape(-1, 65), 0), rtol=1e-10
            )
            np.testing.assert_allclose(layer["heads_at_m"], np.median(c[..., 15], 0), rtol=1e-10)
            np.testing.assert_allclose(layer["at_m"]["median"], np.median(c[..., 15]), rtol=1e-10)


def test_table_shows_layers_heads_and_the_conditioned_forward(
    cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    result = cli("rank-decay", "vit-plain", *FAST, "--conditioned", "10", "--layers", "0,-1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "rank decay of P per layer (m = 16" in out
    for text in (
        "c_m",
        "heads min–max",
        "rank 90%",
        "erank",
        "c_m +10I",
        "0 blocks.0",
        "5 blocks.5",
        "n = 65",
    ):
        assert text in out, text
    data = cli_json("rank-decay", "vit-plain", *FAST, "--conditioned", "10", "--layers", "0,-1")
    first = data["rank_decay"]["layers"][0]
    assert f"{first['at_m']['median']:.3f}" in out  # the printed c_m is the JSON's


@pytest.mark.parametrize("name", ["gpt2-docstrings", "bert-docstrings", "vit-conditioned"])
def test_sample_models_give_a_layers_by_heads_heatmap(
    name: str, tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    r = cli_json("rank-decay", name, *FAST, "--out", str(tmp_path))
    heads = [len(layer["heads_at_m"]) for layer in r["rank_decay"]["layers"]]
    assert len(heads) == r["model"]["num_layers"] and len(set(heads)) == 1
    fig = plots.rank_heatmap_figure(r)
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (len(heads), heads[0])
    np.testing.assert_allclose(image, [la["heads_at_m"] for la in r["rank_decay"]["layers"]])
    written = sorted(p.name for p in tmp_path.iterdir())
    names = [".condcli-manifest.json", "rank_decay.png", "rank_heatmap.png", "report.html", "report.json"]
    assert written == names


def test_curves_figure_draws_the_json_medians_graded_by_depth(vit_json: dict[str, Any]) -> None:
    fig = plots.rank_curves_figure(vit_json)
    plain, cond = fig.axes[0], fig.axes[1]  # a panel for each forward, then the depth colour bar
    for ax, key in ((plain, "rank_decay"), (cond, "rank_decay_conditioned")):
        lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("layer")]
        layers = vit_json[key]["layers"]
        assert len(lines) == len(layers)
        for ln, layer in zip(lines, layers, strict=True):
            np.testing.assert_array_equal(ln.get_ydata(), layer["cumulative"]["median"])
            np.testing.assert_array_equal(ln.get_xdata(), np.arange(1, 66))
        colors = [tuple(ln.get_color()) for ln in lines]
        assert len(set(colors)) == len(colors)  # one colour per depth
        assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == len(layers)  # p10–p90
        assert any(ln.get_label() == "m = 16" for ln in ax.get_lines())
    heat = plots.rank_heatmap_figure(vit_json)
    assert len(heat.axes[0].images) == 1 and len(heat.axes[1].images) == 1
    for panel in heat.axes[:2]:
        norm, cells = panel.images[0].norm, np.asarray(panel.images[0].get_array(), dtype=float)
        assert (norm.vmin, norm.vmax) == (np.nanmin(cells), np.nanmax(cells))  # one scale per panel, its own


def test_plots_are_deterministic(vit_json: dict[str, Any], tmp_path: Path) -> None:
    a = plots.rank_decay_plots(vit_json, tmp_path / "a", "svg")
    b = plots.rank_decay_plots(vit_json, tmp_path / "b", "svg")
    assert [p.name for p in a] == ["rank_decay.svg", "rank_heatmap.svg"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_out_equals_json_and_a_failure_while_writing_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "run"
    result = cli("rank-decay", "vit-plain", *FAST, "--layers", "-1", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "report.json").read_text()) == json.loads(result.stdout)

    from condcli.writing import report_files

    def broken(
        report: Any, fmt: str, title: bool = True, style: str = "default"
    ) -> Callable[[Path], list[Path]]:
        def write(folder: Path) -> list[Path]:
            (folder / "rank_decay.png").write_bytes(b"half")
            raise RuntimeError("disk full")

        return write

    monkeypatch.setattr(report_files, "plots_writer", broken)
    again = tmp_path / "again"
    result = cli("rank-decay", "vit-plain", *FAST, "--layers", "-1", "--out", str(again))
    assert result.exit_code != 0
    assert not again.exists() or list(again.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["vit-plain", "--index", "0"], "--index must be at least 1"),
        (["vit-plain", "--index", "-3"], "--index must be at least 1"),
        (["vit-plain", "--index", "66"], "--index 66 is larger than n = 65"),
        (["gpt2-docstrings", "--index", "500"], "--index 500 is larger than n ="),
        (["vit-plain", "--layers", "none"], "--layers none leaves no attention"),
        (["vit-plain", "--layers", "9"], "--layers asks for a layer"),
        (["vit-conditioned", "--conditioned", "1"], "already adds X + 1·I_k"),
        (["vit-plain", "--conditioned", "5", "--lambda", "10"], "--conditioned 5 and --lambda 10 disagree"),
        (["vit-plain", "--conditioned", "-1"], "--conditioned must be a finite number ≥ 0"),
        (["vit-plain", "--format", "gif"], "--format 'gif' is not known"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], text: str, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "out"
    result = cli("rank-decay", *args, "--max-samples", "2", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert text in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


def test_index_through_main_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from condcli.cli import main

    assert main(["rank-decay", "vit-plain", "--index", "0", "--max-samples", "1"]) == 2
    err = capsys.readouterr().err
    assert "--index must be at least 1" in err and len(err.strip().splitlines()) == 1


def test_float64_rerun_matches(vit_json: dict[str, Any], cli_json: Callable[..., dict[str, Any]]) -> None:
    r = cli_json("rank-decay", "vit-plain", *FAST, "--dtype", "float64", "--layers", "0")
    assert r["settings"]["dtype"] == "float64"
    np.testing.assert_allclose(
        r["rank_decay"]["layers"][0]["cumulative"]["median"],
        vit_json["rank_decay"]["layers"][0]["cumulative"]["median"],
        rtol=1e-5,
    )
    assert torch.get_default_dtype() == torch.float32  # a float64 rerun leaves nothing global behind


def test_readme_numbers_are_what_the_command_gives(cli_json: Callable[..., dict[str, Any]]) -> None:
    """docs/commands/rank-decay.md's sentence on the sample ViT (16 synthetic images) against a fresh run of
    its command."""
    readme = (Path(__file__).parent.parent / "docs" / "commands" / "rank-decay.md").read_text(
        encoding="utf-8"
    )
    assert "condcli rank-decay --conditioned 10 --out rank/" in readme
    r = cli_json("rank-decay", "--conditioned", "10")
    assert r["inputs"]["count"] == 16
    plain, cond = r["rank_decay"]["layers"], r["rank_decay_conditioned"]["layers"]
    erank = [round(la["erank"]["median"], 1) for la in plain]
    erank_c = [round(la["erank"]["median"], 1) for la in cond]
    assert (erank[0], erank[-1], erank_c[0], erank_c[-1]) == (3.3, 2.0, 3.4, 5.5)
    assert f"falls from {erank[0]} (layer 0) to {erank[-1]} (layer 5)" in readme
    assert f"grows from {erank_c[0]} to\n{erank_c[-1]}" in readme
    assert all(a > b for a, b in itertools.pairwise(erank))  # "gets lower with depth"
    assert {la["rank90"]["median"] for la in plain} <= {2.0, 3.0}  # "in 2–3 of 65 singular values"
    assert 6 <= min(la["rank90"]["median"] for la in cond) and max(la["rank90"]["median"] for la in cond) <= 7
