"""Every command that loads a model takes every common option of docs/math.md#cli, with the same defaults and
help; one run per command with all of them together shows that each took effect, and a bad value of each is
the one-line error that names its flag. compare included: [tool.condcli] model and --checkpoint(-a)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from click.testing import Result
from PIL import Image
from typer.core import TyperArgument, TyperGroup, TyperOption

from condcli.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "condcli" / "sample_checkpoints"
COMMANDS = ("spectrum", "sweep-lambda", "rank-decay", "check", "compare", "inspect")
# docs/math.md#cli's common options and their defaults (flag → default)
COMMON: dict[str, Any] = {
    "--weights": None,  # pretrained, random for a file.py:factory MODEL
    "--checkpoint": None,
    "--adapter": None,
    "--seed": 0,
    "--images": None,
    "--text": None,
    "--max-samples": None,
    "--batch-size": 8,
    "--lambda": None,
    "--layers": "all",
    "--device": "auto",
    "--dtype": None,
    "--trust-remote-code": False,
    "--json": False,
}
# where a command's behaviour differs, it says so in its own default or help
OWN_DEFAULT = {
    ("sweep-lambda", "--layers"): "none",
    ("check", "--layers"): None,
    ("inspect", "--batch-size"): 2,
}
OWN_HELP = {("sweep-lambda", "--layers"), ("sweep-lambda", "--lambda"), ("check", "--layers")}
# what each command needs besides the common options to do a small run
EXTRA = {"sweep-lambda": ["--lambdas", "1,10"], "check": ["--max-kappa-layer", "1e30"]}


def params(name: str) -> list[Any]:
    """The command's parameters as Typer built them (what the command line accepts)."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return list(group.commands[name].params)


def option(name: str, flag: str) -> TyperOption:
    found = [p for p in params(name) if isinstance(p, TyperOption) and flag in p.opts]
    assert len(found) == 1, f"{name} has {len(found)} {flag}"
    return found[0]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_declares_every_common_option(name: str) -> None:
    for flag, default in COMMON.items():
        got = option(name, flag)
        assert got.default == OWN_DEFAULT.get((name, flag), default), (name, flag)
        if (name, flag) not in OWN_HELP:
            assert got.help == option("spectrum", flag).help, (name, flag)
    arguments = [p.metavar or p.name.upper() for p in params(name) if isinstance(p, TyperArgument)]
    assert arguments == (["MODEL_A", "MODEL_B"] if name == "compare" else ["MODEL"])
    assert all(not p.required for p in params(name))  # MODEL may always come from [tool.condcli]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return folder


def reports(name: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    return [data["a"], data["b"]] if name == "compare" else [data]


def layer_indices(name: str, r: dict[str, Any]) -> list[int]:
    if name == "sweep-lambda":
        return [layer["index"] for layer in r["sweep"]["layers"]]
    if name == "rank-decay":
        return [layer["index"] for layer in r["rank_decay"]["layers"]]
    return [layer["index"] for layer in r["layers"]]


@pytest.mark.parametrize("name", COMMANDS)
def test_all_common_options_together_take_effect(
    name: str, images: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    models = ["vit-plain", "vit-plain"] if name == "compare" else ["vit-plain"]  # B reads --checkpoint
    data = cli_json(
        name,
        *models,
        *EXTRA.get(name, []),
        *("--weights", "random", "--checkpoint", str(SAMPLES / "vit-plain" / "model.safetensors")),
        *("--seed", "3", "--images", str(images), "--max-samples", "2", "--batch-size", "1"),
        *("--lambda", "7", "--layers", "0", "--device", "cpu", "--dtype", "float64"),
        "--trust-remote-code",
    )
    assert data["command"] == name
    for side, r in enumerate(reports(name, data)):
        # --checkpoint is the weights (compare: B's); A of compare is --weights random
        weights = "random" if (name, side) == ("compare", 0) else "file"
        assert (r["model"]["spec"], r["model"]["weights"]) == ("vit-plain", weights)
        settings = r["settings"]
        assert (settings["seed"], settings["lambda"], settings["device"], settings["dtype"]) == (
            3,
            7.0,
            "cpu",
            "float64",
        )
        assert r["inputs"]["kind"] == "images" and str(images) in r["inputs"]["description"]
        assert r["inputs"]["count"] == (1 if name == "inspect" else 2)  # inspect: one batch of --batch-size
        assert layer_indices(name, r) == [0]


@pytest.mark.parametrize("name", COMMANDS)
def test_text_inputs(name: str, tmp_path: Path, cli_json: Callable[..., dict[str, Any]]) -> None:
    text = tmp_path / "lines.txt"
    text.write_text("def add(a, b):\nreturn the sum\nparse the file\n", encoding="utf-8")
    models = ["bert-docstrings", "gpt2-docstrings"] if name == "compare" else ["bert-docstrings"]
    data = cli_json(
        name, *models, *EXTRA.get(name, []), "--text", str(text), "--max-samples", "2", "--layers", "0"
    )
    for r in reports(name, data):
        assert r["inputs"]["kind"] == "text" and r["inputs"]["count"] == 2


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--weights", "trained"),
        ("--batch-size", "0"),
        ("--max-samples", "0"),
        ("--layers", "x"),
        ("--device", "tpu"),
        ("--lambda", "-1"),
        ("--checkpoint", "missing.safetensors"),
        ("--adapter", "missing.toml"),
    ],
)
@pytest.mark.parametrize("name", COMMANDS)
def test_a_bad_value_is_one_line_naming_its_flag(
    name: str, flag: str, value: str, cli: Callable[..., Result]
) -> None:
    models = ["vit-plain", "vit-conditioned"] if name == "compare" else ["vit-plain"]
    rule = ["--max-kappa-layer", "1e30"] if name == "check" else []
    fast = [] if flag == "--max-samples" else ["--max-samples", "1"]  # compare analyses A before B fails
    result = cli(name, *models, *rule, *fast, flag, value)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and flag in result.stderr, result.stderr


def test_compare_takes_a_from_tool_condcli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_json: Callable[..., dict[str, Any]]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.condcli]\nmodel = "vit-plain"\n')
    data = cli_json("compare", "vit-conditioned", "--max-samples", "1", "--layers", "none")
    assert (data["a"]["model"]["spec"], data["a"]["model"]["from"]) == (
        "vit-plain",
        "[tool.condcli] model in pyproject.toml",
    )
    assert (data["b"]["model"]["spec"], data["b"]["model"]["from"]) == ("vit-conditioned", "command line")


def test_compare_two_checkpoints_of_one_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_json: Callable[..., dict[str, Any]]
) -> None:
    # the configured architecture twice: A with --checkpoint-a, B with --checkpoint
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.condcli]\nmodel = "vit-plain"\n')
    plain, conditioned = (str(SAMPLES / s / "model.safetensors") for s in ("vit-plain", "vit-conditioned"))
    fast = ["--max-samples", "1", "--layers", "none"]
    data = cli_json("compare", "--checkpoint-a", plain, "--checkpoint", conditioned, *fast)
    for side, file in (("a", plain), ("b", conditioned)):
        alone = cli_json("spectrum", "--checkpoint", file, *fast)
        assert data[side]["embedding"]["kappa"] == alone["embedding"]["kappa"], side
    assert data["a"]["embedding"]["kappa"] != data["b"]["embedding"]["kappa"]


def test_compare_of_a_model_with_itself_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Result]
) -> None:
    monkeypatch.chdir(tmp_path)  # no [tool.condcli] model: A is the sample ViT, vit-plain
    result = cli("compare", "vit-plain", "--checkpoint-a", "x.pt", "--checkpoint", "x.pt")
    assert result.exit_code == 2 and "A and B are both vit-plain" in result.stderr
    assert len(result.stderr.splitlines()) == 1
