"""`condcli inspect` end to end through the CLI: JSON shape, exit codes, one-line errors, default MODEL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import Result

from condcli.cli import main

TINY = ["vit_tiny_patch16_224", "--weights", "random", "--max-samples", "1"]


def test_inspect_json_describes_the_model_and_capture(cli_json: Callable[..., dict[str, Any]]) -> None:
    report = cli_json("inspect", *TINY)
    assert report["schema_version"] == 1 and report["command"] == "inspect"
    assert report["model"] == {
        "spec": "vit_tiny_patch16_224",
        "from": "command line",
        "family": "timm-vit",
        "source": "timm",
        "weights": "random",
        "num_layers": 12,
    }
    assert report["embedding"]["where"] == "pos_drop"
    assert report["inputs"]["kind"] == "synthetic" and report["inputs"]["tokens"] == 197
    assert report["inputs"]["tokens_per_sample"] == [197]
    assert report["inputs"]["dim"] == 192
    first = report["layers"][0]
    assert first["attn_input_shape"] == [1, 197, 192] and first["probs_shape"] == [1, 3, 197, 197]
    assert [layer["index"] for layer in report["layers"]] == list(range(12))


def test_inspect_table_output(cli: Callable[..., Result]) -> None:
    result = cli("inspect", *TINY)
    assert result.exit_code == 0, result.output
    assert "timm-vit" in result.stdout and "softmax over all tokens" in result.stdout
    # module paths in brackets are text, not rich markup (rich once swallowed "[pos_drop]")
    assert "[pos_drop]" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["inspect", "vit_bas_patch16_224"], 2, "did you mean vit_base_patch16_224"),
        (["inspect", "vit_tiny_patch16_224"], 2, "--weights random"),
        (["inspect", *TINY, "--device", "tpu"], 2, "unknown device"),
        (["inspect", *TINY, "--weights", "trained"], 2, "--weights 'trained' is not known"),
        (["inspect", *TINY, "--text", "x.txt"], 2, "--text was given for an image model"),
        (["inspect", *TINY, "--checkpoint", "missing.safetensors"], 2, "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], code: int, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == code
    err = capsys.readouterr().err
    assert text in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cuda_without_a_gpu_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["inspect", *TINY, "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_default_model_from_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.condcli]\nmodel = "deit_tiny_patch16_224"\n')
    assert main(["inspect", "--weights", "random", "--max-samples", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["spec"] == "deit_tiny_patch16_224"
    assert report["model"]["from"] == "[tool.condcli] model in pyproject.toml"
    (tmp_path / "pyproject.toml").write_text("[tool.condcli\n")
    assert main(["inspect"]) == 2
    assert "invalid TOML" in capsys.readouterr().err


def test_dtype_float64_rerun_feeds_the_model_float64_pixels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", *TINY, "--dtype", "float64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["dtype"] == "float64"
