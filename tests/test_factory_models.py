"""MODEL as the user's own code: ``file.py:factory`` (a file written here, which records that it ran) and
``package.module:factory`` (tests.toy_models:toy_factory). spectrum, rank-decay and check run through both,
with every number checked against float64 NumPy on tensors read by the test's own hooks on a reference
model the test builds itself; --model-arg, [tool.condcli] model_args, --weights and --checkpoint."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result
from safetensors.torch import load_file, save_file
from typer.core import TyperArgument, TyperGroup, TyperOption

from condcli.inputs.batches import Batch, InputSpec, stream
from condcli.loading.factory import parse_model_args
from condcli.loading.sources import LoadOptions, load
from tests.helpers import np_cumulative, np_kappa
from tests.recording import hooks
from tests.toy_models import toy_factory

COMMANDS = ("spectrum", "sweep-lambda", "rank-decay", "check", "compare", "inspect")
TOY = "tests.toy_models:toy_factory"
FAST = ["--max-samples", "2", "--batch-size", "2", "--dtype", "float64"]
FACTORY_FILE = '''\
"""A user's model file: a small timm ViT. Importing it leaves a mark and prints (to stdout)."""
from pathlib import Path

import timm

MARK = Path(__file__).with_name("ran.txt")
MARK.write_text(MARK.read_text() + "x" if MARK.exists() else "x")
print("hello from the factory file")


def build(depth: int = 2, dim: int = 32, heads: int = 2, img: int = 32):
    return timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=img, patch_size=8, embed_dim=dim, depth=depth,
        num_heads=heads,
    )
'''


@pytest.fixture
def factory_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_vit.py"
    path.write_text(FACTORY_FILE, encoding="utf-8")
    return path


def batches_of(spec: str, model_args: dict[str, Any], count: int = 2) -> list[Batch]:
    """The inputs condcli reads for ``spec``: its preprocessing of the synthetic images of seed 0."""
    loaded = load(spec, LoadOptions(device="cpu", model_args=model_args))
    return list(stream(loaded.preprocessing, InputSpec(max_samples=count, batch_size=count)))


def file_reference(path: Path, **kwargs: Any) -> torch.nn.Module:
    """The factory file's model built by the test itself (runpy), seeded as condcli seeds it, in float64."""
    build = runpy.run_path(str(path))["build"]
    torch.manual_seed(0)
    model: torch.nn.Module = build(**kwargs)
    return model.double().eval()


def toy_reference(**kwargs: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return toy_factory(**kwargs).double().eval()


def test_every_model_command_takes_model_args_and_warns_that_a_file_runs() -> None:
    from condcli.cli import app

    group = typer_group(app)
    helps = set()
    for name in COMMANDS:
        params = group.commands[name].params
        (option,) = [p for p in params if isinstance(p, TyperOption) and "--model-arg" in p.opts]
        assert option.multiple and option.default is None
        helps.add(option.help)
        for argument in (p for p in params if isinstance(p, TyperArgument)):
            assert "file.py:factory" in (argument.help or "") or name == "compare"
            assert "RUNS ITS CODE" in (argument.help or "") or name == "compare"
    (text,) = helps  # one declaration, the same help everywhere
    assert "JSON literal" in text and "key=value" in text


def typer_group(app: Any) -> TyperGroup:
    import typer

    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return group


def test_model_args_are_json_literals_else_strings() -> None:
    got = parse_model_args(
        ["depth=4", "lr=1e-3", "bias=true", "drop=null", "sizes=[2, 4]", "name=small", 'code="7"', "eq=a=b"]
    )
    assert got == {
        "depth": 4,
        "lr": 1e-3,
        "bias": True,
        "drop": None,
        "sizes": [2, 4],
        "name": "small",
        "code": "7",
        "eq": "a=b",
    }
    assert isinstance(got["depth"], int) and isinstance(got["lr"], float)


def test_file_factory_runs_its_file_and_spectrum_equals_numpy(
    factory_file: Path, cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    mark = factory_file.with_name("ran.txt")
    spec = f"{factory_file}:build"
    args = ["--model-arg", "depth=3", "--model-arg", "dim=48"]
    r = cli_json("spectrum", spec, *args, *FAST)  # the file's print went elsewhere: stdout is the JSON
    assert mark.read_text() == "x"  # naming the file ran it (once)
    assert (r["model"]["spec"], r["model"]["source"], r["model"]["weights"]) == (spec, "local", "random")
    assert (r["model"]["family"], r["model"]["num_layers"], r["inputs"]["dim"]) == ("timm-vit", 3, 48)
    assert "hello from the factory file" in cli("spectrum", spec, *args, *FAST, "--json").stderr
    ref = file_reference(factory_file, depth=3, dim=48)
    batches = batches_of(spec, {"depth": 3, "dim": 48})
    with hooks(ref, {"x": (ref.pos_drop, False)}) as seen, torch.no_grad():
        ref(batches[0].inputs["pixel_values"].double())
    X = seen["x"][0].numpy()
    assert X.shape == (2, 17, 48)  # 32×32 images (patch_embed.img_size) in 8×8 patches + class token
    np.testing.assert_allclose(r["embedding"]["kappa"]["per_sample"], np_kappa(X), rtol=1e-9)
    for layer, block in zip(r["layers"], ref.blocks, strict=True):
        with hooks(ref, {"x": (block, True)}) as seen, torch.no_grad():
            ref(batches[0].inputs["pixel_values"].double())
        np.testing.assert_allclose(layer["kappa"]["per_sample"], np_kappa(seen["x"][0].numpy()), rtol=1e-9)
    # --weights pretrained: the same model, labelled so; nothing is fetched for a factory
    labelled = cli_json("spectrum", spec, *args, *FAST, "--weights", "pretrained", "--layers", "none")
    assert labelled["model"]["weights"] == "pretrained"
    assert labelled["embedding"]["kappa"] == r["embedding"]["kappa"]


def toy_probs(ref: torch.nn.Module, pixels: torch.Tensor) -> list[np.ndarray]:
    """P of every toy layer: the output of its own nn.Softmax, read by the test's hooks."""
    where = {f"p{i}": (layer.attn.softmax, False) for i, layer in enumerate(ref.layers)}
    with hooks(ref, where) as seen, torch.no_grad():
        ref(pixels.double())
    return [seen[f"p{i}"][0].numpy() for i in range(len(ref.layers))]


def test_module_factory_rank_decay_equals_numpy_on_the_hooked_p(
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    r = cli_json("rank-decay", TOY, "--model-arg", "depth=2", "--model-arg", "d=24", *FAST)
    assert (r["model"]["spec"], r["model"]["family"], r["model"]["num_layers"]) == (TOY, "generic", 2)
    ref = toy_reference(depth=2, d=24)
    pixels = batches_of(TOY, {"depth": 2, "d": 24})[0].inputs["pixel_values"]
    assert pixels.shape == (2, 3, 32, 32)  # toy_factory declares img_size = 32
    for layer, p in zip(r["rank_decay"]["layers"], toy_probs(ref, pixels), strict=True):
        assert p.shape == (2, 4, 16, 16)
        c = np_cumulative(p)
        np.testing.assert_allclose(layer["cumulative"]["median"], np.median(c.reshape(-1, 16), 0), rtol=1e-10)


@pytest.mark.parametrize("where", ["file", "module"])
def test_check_through_a_factory_gates_the_numpy_kappa(
    where: str, factory_file: Path, cli: Callable[..., Result]
) -> None:
    spec = f"{factory_file}:build" if where == "file" else TOY
    if where == "file":
        ref, take = file_reference(factory_file, depth=1), "pos_drop"
    else:
        ref, take = toy_reference(depth=1), "embed"
    pixels = batches_of(spec, {"depth": 1})[0].inputs["pixel_values"]
    with hooks(ref, {"x": (getattr(ref, take), False)}) as seen, torch.no_grad():
        ref(pixels.double())
    worst = float(np_kappa(seen["x"][0].numpy()).max())
    run = [spec, "--model-arg", "depth=1", *FAST, "--statistic", "max", "--layers", "none"]
    assert cli("check", *run, "--max-kappa", f"{worst * 1.000001}").exit_code == 0
    failed = cli("check", *run, "--max-kappa", f"{worst * 0.999999}")
    assert failed.exit_code == 1, failed.output


def test_checkpoint_round_trip_equals_numpy_on_the_saved_weights(
    tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    torch.manual_seed(123)
    trained = toy_factory(depth=2, d=24)
    with torch.no_grad():
        for p in trained.parameters():
            p.mul_(1.7).add_(0.05)  # not any seed's init
    file = tmp_path / "toy.safetensors"
    save_file({k: v.contiguous() for k, v in trained.state_dict().items()}, str(file))
    ref = toy_factory(depth=2, d=24)
    ref.load_state_dict(load_file(file))  # safetensors itself, not condcli's reader
    ref = ref.double().eval()
    args = [TOY, "--model-arg", "depth=2", "--model-arg", "d=24", *FAST, "--layers", "none"]
    r = cli_json("spectrum", *args, "--checkpoint", str(file))
    assert r["model"]["weights"] == "file"
    pixels = batches_of(TOY, {"depth": 2, "d": 24})[0].inputs["pixel_values"]
    with hooks(ref, {"x": (ref.layers[0], True)}) as seen, torch.no_grad():  # X: the input of layers.0
        ref(pixels.double())
    np.testing.assert_allclose(
        r["embedding"]["kappa"]["per_sample"], np_kappa(seen["x"][0].numpy()), rtol=1e-9
    )
    fresh = cli_json("spectrum", *args)
    assert fresh["embedding"]["kappa"]["per_sample"] != r["embedding"]["kappa"]["per_sample"]


def test_pyproject_names_a_factory_file_relative_to_itself_with_model_args(
    tmp_path: Path,
    factory_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Callable[..., Result],
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    project = factory_file.parent
    (project / "pyproject.toml").write_text(
        '[tool.condcli]\nmodel = "my_vit.py:build"\nmodel_args = { depth = 1, dim = 24 }\n'
    )
    monkeypatch.chdir(project)
    fast = [*FAST, "--layers", "none"]
    r = cli_json("spectrum", *fast)
    assert (r["model"]["spec"], r["model"]["num_layers"], r["inputs"]["dim"]) == ("my_vit.py:build", 1, 24)
    assert r["model"]["from"] == "[tool.condcli] model in pyproject.toml"
    assert cli_json("spectrum", *fast, "--model-arg", "depth=2")["model"]["num_layers"] == 2  # CLI wins
    # a MODEL on the command line does not take the table's arguments
    assert cli_json("spectrum", TOY, *fast)["model"]["num_layers"] == 3
    # from elsewhere, check --config finds the file beside that pyproject.toml
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    gate = cli("check", "--config", str(project / "pyproject.toml"), *fast, "--max-kappa", "1e30", "--json")
    assert gate.exit_code == 0, gate.output


def test_compare_gives_model_args_to_the_factory_side_only(cli_json: Callable[..., dict[str, Any]]) -> None:
    r = cli_json(
        "compare", "vit-plain", TOY, "--model-arg", "depth=1", "--max-samples", "1", "--layers", "none"
    )
    assert (r["a"]["model"]["spec"], r["b"]["model"]["spec"]) == ("vit-plain", TOY)
    assert (r["a"]["model"]["num_layers"], r["b"]["model"]["num_layers"]) == (6, 1)


def test_a_factory_may_return_a_hugging_face_model(
    tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    path = tmp_path / "tiny_bert.py"
    path.write_text(
        "from transformers import BertConfig, BertForMaskedLM\n\n\n"
        "def build(layers: int = 2):\n"
        "    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=layers,\n"
        "                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)\n"
        "    return BertForMaskedLM(config)\n"
    )
    r = cli_json("spectrum", f"{path}:build", "--model-arg", "layers=3", "--max-samples", "2")
    assert (r["model"]["family"], r["model"]["num_layers"], r["inputs"]["kind"]) == (
        "hf-bert",
        3,
        "synthetic",
    )
    assert "random token ids" in r["inputs"]["preprocessing"]  # no tokenizer: ids below its vocab_size
    assert r["inputs"]["dim"] == 32
