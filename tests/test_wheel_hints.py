"""What condcli tells a user whose samples are missing or damaged: something they can do where they are
(issue 39). A pip user has no Makefile and no samplegen; a clone can rebuild; $CONDCLI_SAMPLES can be unset.
The wheel itself is exercised by tests/test_wheel.py."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from condcli.cli import main
from condcli.loading import samples
from condcli.loading.samples import SAMPLES_ENV, restore_hint, samples_dir

REINSTALL = "reinstall condcli: pip install --force-reinstall --no-deps condcli"


def _no_samplegen(monkeypatch: pytest.MonkeyPatch) -> None:
    """As after `pip install condcli`: samplegen is not importable (it is not in the wheel)."""
    find = importlib.util.find_spec
    monkeypatch.setattr(
        samples, "find_spec", lambda name, *a: None if name == "samplegen" else find(name, *a)
    )


def test_the_hint_fits_where_condcli_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(SAMPLES_ENV, raising=False)
    assert importlib.util.find_spec("samplegen") is not None  # the test runs in the checkout
    assert restore_hint() == "rebuild the samples with 'python -m samplegen.build'"
    monkeypatch.setenv(SAMPLES_ENV, str(tmp_path))
    assert restore_hint().startswith(f"unset {SAMPLES_ENV} ")
    monkeypatch.delenv(SAMPLES_ENV)
    _no_samplegen(monkeypatch)
    assert restore_hint() == REINSTALL


def test_models_without_samples_tells_a_pip_user_to_reinstall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_samplegen(monkeypatch)
    monkeypatch.setattr(samples, "samples_dir", lambda: tmp_path / "gone")
    assert main(["models"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # text lines wrap at the width
    assert f"no sample checkpoints in {tmp_path / 'gone'}" in out and REINSTALL in out
    assert "make" not in out


def test_a_damaged_sample_metadata_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _no_samplegen(monkeypatch)
    shutil.copytree(samples_dir() / "vit-plain", tmp_path / "vit-plain")
    (tmp_path / "vit-plain" / "metadata.json").write_text("[1]", encoding="utf-8")
    monkeypatch.setenv(SAMPLES_ENV, str(tmp_path))
    assert main(["models"]) == 2
    err = capsys.readouterr().err
    assert "metadata.json is not a JSON object" in err and err.count("\n") == 1
    assert f"unset {SAMPLES_ENV}" in " ".join(err.split()) and "make" not in err
    monkeypatch.delenv(SAMPLES_ENV)
    monkeypatch.setattr(samples, "samples_dir", lambda: tmp_path)
    assert main(["models"]) == 2
    err = capsys.readouterr().err
    assert REINSTALL in " ".join(err.split()) and "make" not in err
