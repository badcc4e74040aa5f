"""A factory MODEL that cannot be loaded is one line and exit 2 (never a traceback) for every way it fails:
the file, its import, the attribute, the arguments, the call, the result, the input size, the config.
And the image size a plain module declares is the size condcli feeds it, with the normalisation it asks."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result
from PIL import Image
from torch import nn

from condcli.loading.factory import factory_preprocessing
from tests.toy_models import ToyModel

OK_FILE = """\
import sys

import torch

VALUE = 3


def build(depth: int = 1):
    from tests.toy_models import toy_factory

    return toy_factory(depth=depth)


def raises(size: int = 3):
    raise ValueError(f"bad size {size}\\nsecond line of the message")


def number():
    return 42


def undeclared():
    from tests.toy_models import ToyModel

    return ToyModel(depth=1)


def exits():
    sys.exit(4)
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with ok.py, a file whose import raises, one with a syntax error, a text file, a
    package whose module raises on import and one that imports a missing dependency; the cwd."""
    (tmp_path / "ok.py").write_text(OK_FILE)
    (tmp_path / "broken.py").write_text('raise RuntimeError("broken at import")\n')
    (tmp_path / "syntax.py").write_text("def build(:\n")
    (tmp_path / "notes.txt").write_text("not python\n")
    (tmp_path / "sub").mkdir()
    package = tmp_path / "gpkg_factory_errors"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "raising.py").write_text('raise KeyError("no such config")\n')
    (package / "needs.py").write_text("import zz_not_installed_anywhere\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the cwd condcli puts on it goes away afterwards
    return tmp_path


CASES = [
    (["missing.py:build"], "missing.py: no such file"),
    (["notes.txt:build"], "notes.txt is not a .py file"),
    (["./sub:build"], "sub is a folder"),
    (["broken.py:build"], "running broken.py failed (RuntimeError: broken at import)"),
    (["syntax.py:build"], "running syntax.py failed (SyntaxError:"),
    (["ok.py:nope"], "ok.py has no attribute 'nope'"),
    (
        ["ok.py:raises"],
        "raises() raised ValueError: bad size 3 second line of the message (at ok.py line 15)",
    ),
    (["ok.py:raises", "--model-arg", "size=5"], "raises() raised ValueError: bad size 5"),
    (["ok.py:exits"], "exits() raised SystemExit: 4"),
    (["ok.py:number"], "number() returned an object of type int, not an nn.Module"),
    (["ok.py:VALUE"], "VALUE is an object of type int, not a function"),
    (["ok.py:build", "--model-arg", "width=2"], "build() does not take these --model-arg"),
    (["ok.py:build", "--model-arg", "depth"], "--model-arg depth is not key=value"),
    (["ok.py:build", "--model-arg", "=2"], "--model-arg =2 is not key=value"),
    (["ok.py:build", "--model-arg", "depth=1", "--model-arg", "depth=2"], "--model-arg gives depth twice"),
    (["vit-plain", "--model-arg", "depth=1"], "--model-arg given, but vit-plain is not a factory"),
    (["ok.py:undeclared"], "the model declares no input size"),
    (["zz_no_such_package.models:build"], "no module named 'zz_no_such_package'"),
    (["gpkg_factory_errors.raising:build"], "importing gpkg_factory_errors.raising failed (KeyError:"),
    (
        ["gpkg_factory_errors.needs:build"],
        "(ModuleNotFoundError: No module named 'zz_not_installed_anywhere')",
    ),
]


@pytest.mark.parametrize(("args", "expected"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_bad_factory_is_one_line_and_exit_2(
    args: list[str], expected: str, folder: Path, cli: Callable[..., Result]
) -> None:
    result = cli("spectrum", *args, "--max-samples", "1", "--layers", "none")
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output, result.stderr
    assert expected in result.stderr, result.stderr


def test_the_factory_s_arguments_are_named_when_refused(folder: Path, cli: Callable[..., Result]) -> None:
    result = cli("spectrum", "ok.py:build", "--model-arg", "width=2")
    assert "unexpected keyword argument 'width'" in result.stderr and "it takes: depth" in result.stderr


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('model = "vit-plain"\nmodel_args = { depth = 1 }\n', "model is not a factory"),
        ('model = "ok.py:build"\nmodel_args = 3\n', "model_args must be a table"),
        ('model = "ok.py:build"\nmodel_args = { "not a name" = 1 }\n', "model_args must be a table"),
    ],
)
def test_a_bad_model_args_table_is_one_line(
    table: str, expected: str, folder: Path, cli: Callable[..., Result]
) -> None:
    (folder / "pyproject.toml").write_text("[tool.condcli]\n" + table)
    result = cli("spectrum", "--max-samples", "1", "--layers", "none")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.output
    assert expected in result.stderr


def _sized(model: nn.Module, **attrs: object) -> nn.Module:
    for name, value in attrs.items():
        setattr(model, name, value)
    return model


@pytest.mark.parametrize(
    ("model", "size", "where"),
    [
        (_sized(ToyModel(depth=1), img_size=40), (40, 40), "ToyModel.img_size"),
        (_sized(ToyModel(depth=1), image_size=(24, 48)), (24, 48), "ToyModel.image_size"),
        (
            _sized(ToyModel(depth=1), patch_embed=_sized(nn.Identity(), img_size=(16, 32))),
            (16, 32),
            "patch_embed",
        ),
        (_sized(ToyModel(depth=1), pretrained_cfg={"input_size": (3, 56, 56)}), (56, 56), "pretrained_cfg"),
    ],
)
def test_the_declared_size_is_the_size_fed(model: nn.Module, size: tuple[int, int], where: str) -> None:
    pre = factory_preprocessing(model, "x.py:build")
    assert pre.image_size == size and where in pre.describe
    assert pre.image_transform is not None
    pixels = pre.image_transform(Image.new("RGB", (100, 90), (128, 128, 128)))
    assert tuple(pixels.shape) == (3, *size)
    # no pretrained_cfg mean/std: timm's ImageNet defaults, and the description says they are defaults
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    if "pretrained_cfg" not in where:
        assert "timm's defaults" in pre.describe
    np.testing.assert_allclose(pixels.mean((1, 2)).numpy(), (128 / 255 - mean) / std, rtol=1e-5)


def test_a_pretrained_cfg_gives_the_normalisation() -> None:
    model = _sized(
        ToyModel(depth=1), img_size=32, pretrained_cfg={"mean": (0.5, 0.5, 0.5), "std": (0.25,) * 3}
    )
    pre = factory_preprocessing(model, "x.py:build")
    assert pre.image_transform is not None and "timm's defaults" not in pre.describe
    pixels = pre.image_transform(Image.new("RGB", (40, 40), (51, 102, 204)))
    np.testing.assert_allclose(
        pixels.mean((1, 2)).numpy(), (np.array([51, 102, 204]) / 255 - 0.5) / 0.25, rtol=1e-5
    )


def test_debug_shows_the_factory_s_own_traceback(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from condcli.cli.main import _state, main

    monkeypatch.setitem(_state, "debug", False)  # restored afterwards: --debug does not leak into other tests
    assert main(["spectrum", "ok.py:raises", "--max-samples", "1"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(["spectrum", "ok.py:raises", "--max-samples", "1", "--debug"]) == 2
    err = capsys.readouterr().err
    assert 'ok.py", line 15, in raises' in err and "ValueError: bad size 3" in err
