"""`condcli models` and the default MODEL (the shipped sample ViT), through the CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from condcli.cli import main
from condcli.loading.samples import SAMPLES_ENV, samples_dir

NAMES = ("bert-docstrings", "gpt2-docstrings", "llama-docstrings", "vit-conditioned", "vit-plain")


def test_models_json_lists_every_sample_with_its_metric(cli_json: Callable[..., dict[str, Any]]) -> None:
    report = cli_json("models")
    assert report["schema_version"] == 1 and report["command"] == "models"
    rows = {s["name"]: s for s in report["samples"]}
    assert tuple(sorted(rows)) == NAMES
    for name, row in rows.items():
        meta = json.loads((samples_dir() / name / "metadata.json").read_text())
        assert row["heldout"] == {"metric": meta["heldout"]["metric"], "value": meta["heldout"]["value"]}
        assert row["size_bytes"] == sum(p.stat().st_size for p in (samples_dir() / name).iterdir())
    assert rows["vit-conditioned"]["conditioning"] == "X + 1·I_k"
    assert rows["vit-plain"]["conditioning"] is None


def test_models_table(cli: Callable[..., Result]) -> None:
    result = cli("models")
    assert result.exit_code == 0, result.output
    meta = json.loads((samples_dir() / "vit-plain" / "metadata.json").read_text())
    assert f"{meta['heldout']['value']:.1%} accuracy" in result.stdout
    for name in NAMES:
        assert name in result.stdout
    gpt2 = json.loads((samples_dir() / "gpt2-docstrings" / "metadata.json").read_text())
    assert f"loss {gpt2['heldout']['value']:.3f} nats/token" in result.stdout
    assert "X + 1·I_k" in result.stdout and "condcli inspect vit-plain" in result.stdout


def test_models_says_what_the_vit_pair_shows(cli: Callable[..., Result]) -> None:
    plain, cond = (
        json.loads((samples_dir() / name / "metadata.json").read_text())["heldout"]["value"]
        for name in ("vit-plain", "vit-conditioned")
    )
    text = " ".join(cli("models").stdout.split())  # rich wraps long lines
    assert f"held-out accuracy {plain:.1%} vs {cond:.1%} ({100 * (cond - plain):+.1f} points)" in text
    assert ("conditioning did not help at this scale" in text) == (cond <= plain)


def test_no_samples_and_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SAMPLES_ENV, str(tmp_path))
    assert main(["models"]) == 0
    assert "no sample checkpoints" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["inspect"]) == 2  # no MODEL and no default sample: one line, exit 2
    assert "default sample checkpoint 'vit-plain' is not installed" in capsys.readouterr().err
    shutil.copytree(
        Path(__file__).resolve().parent.parent / "condcli" / "sample_checkpoints" / "vit-plain",
        tmp_path / "x",
    )
    (tmp_path / "x" / "metadata.json").write_text("{")
    assert main(["models"]) == 2
    err = capsys.readouterr().err
    assert "metadata.json: invalid JSON" in err and err.count("\n") == 1


def test_default_model_is_the_shipped_sample_vit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject.toml here
    assert main(["inspect", "--max-samples", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["spec"] == "vit-plain"
    assert report["model"]["from"] == "the shipped sample ViT (default)"
    assert report["model"]["family"] == "timm-vit" and report["inputs"]["tokens"] == 65
    assert report["embedding"]["model_conditioning"] is None


def test_inspect_names_the_conditioning_a_sample_was_trained_with(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "vit-conditioned", "--max-samples", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["embedding"]["model_conditioning"] == "X + 1·I_k"
    assert report["embedding"]["where"] == "pos_drop.inner"
    assert any("X is taken before it" in note for note in report["notes"])
