"""MODEL as ``path/to/file.py:factory`` or ``package.module:factory``: the user's own code builds the model.

Naming a file runs it: the file is imported as Python would import a script (its folder first on
``sys.path``), so any code at its top level runs, and then ``factory(**model_args)`` is called. A module
name is imported the same way, with the current directory searched first (as ``python -m`` does). Use only
code you trust, exactly as with transformers' ``trust_remote_code``.

The factory returns an ``nn.Module``. Every way it can fail (no such file, not a .py file, an import that
raises, no such attribute, arguments it does not take, a factory that raises, a result that is not a module)
is one :class:`~condcli.errors.InputError` or :class:`~condcli.errors.UsageError` naming the exception's
type and message, never a traceback.

A plain module has no timm or Hugging Face preprocessing config, so it declares the size of the images it
reads (:func:`factory_preprocessing`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from torch import nn

from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Preprocessing

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"{_NAME}(?:\.{_NAME})*")
SIZE_ATTRIBUTES = ("img_size", "image_size")  # where a plain module may declare its input size
MAX_MESSAGE = 300  # characters of an exception's message quoted in an error line


@dataclass(frozen=True)
class FactorySpec:
    """A parsed ``file.py:factory`` or ``package.module:factory``."""

    text: str  # what the user typed
    attr: str  # the factory's name in its module (dotted for an attribute of an attribute)
    file: Path | None = None  # file.py:factory
    module: str | None = None  # package.module:factory

    @property
    def where(self) -> str:
        return str(self.file) if self.file is not None else str(self.module)


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "~")) or "/" in text or os.sep in text


def parse_factory(text: str) -> FactorySpec | None:
    """``text`` as a factory MODEL, or None where it is not written as one (no disk access)."""
    head, sep, attr = text.rpartition(":")
    if not sep or not head or not DOTTED.fullmatch(attr):
        return None
    if head.endswith(".py") or _looks_like_path(head):
        return FactorySpec(text, attr, file=Path(head).expanduser())
    if DOTTED.fullmatch(head):
        if Path(head).is_file():  # e.g. model.txt:build — a file, not the module txt of a package model
            return FactorySpec(text, attr, file=Path(head))
        return FactorySpec(text, attr, module=head)
    return None


def check_file(spec: FactorySpec) -> None:
    """A file factory's file exists and is Python source (checked before anything runs)."""
    if spec.file is None:
        return
    if not spec.file.exists():
        raise InputError(f"{spec.text}: {spec.file}: no such file", "check the path of the Python file")
    if spec.file.is_dir() or spec.file.suffix != ".py":
        what = "a folder" if spec.file.is_dir() else "not a .py file"
        raise InputError(
            f"{spec.text}: {spec.file} is {what}",
            "name a Python source file and its factory, e.g. models/net.py:build",
        )


def rebased(text: str, folder: Path) -> str:
    """``text`` with a relative factory file made relative to ``folder`` (a pyproject.toml's own folder)."""
    spec = parse_factory(text)
    if spec is None or spec.file is None or spec.file.is_absolute():
        return text
    if folder.resolve() == Path.cwd().resolve():
        return text
    return f"{folder / spec.file}:{spec.attr}"


def parse_model_args(items: Iterable[str]) -> dict[str, Any]:
    """``key=value`` strings → keyword arguments; a value is a JSON literal where it parses (4, 1e-3, true,
    null, [2, 4], "x"), else the string as typed."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(_NAME, key):
            raise UsageError(
                f"`model_args={item}` is not key=value with a Python name as key",
                "e.g. `model_args=depth=4` or `model_args=name=small`",
            )
        if key in out:
            raise UsageError(f"`model_args` gives {key} twice", "give each keyword argument once")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:  # not a JSON literal: the string as typed
            out[key] = value
        except (ValueError, RecursionError):  # JSON, but nested too deeply or an integer of 1000s of digits
            from condcli.parsing import parse_json

            hint = "give a plain literal (4, 1e-3, [2, 4]) or a word"
            out[key] = parse_json(value, f"`model_args={key}=…`", hint)
    return out


def _one_line(error: BaseException) -> str:
    message = " ".join(str(error).split())
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _where_raised(error: BaseException, file: str | None) -> str:
    """`` (at file.py line N)``: the last line of ``file`` the traceback passed through, if any."""
    if file is None:
        return ""
    target = os.path.realpath(file)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if os.path.realpath(f.filename) == target]
    return f" (at {Path(file).name} line {frames[-1].lineno})" if frames else ""


def _import_file(spec: FactorySpec) -> ModuleType:
    assert spec.file is not None
    path = spec.file.resolve()
    name = "condcli_factory_" + re.sub(r"\W", "_", path.stem)
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:  # pragma: no cover - a .py file always has a source loader
        raise InputError(f"{spec.text}: Python cannot import {path}", "name a Python source file")
    module = importlib.util.module_from_spec(found)
    folder = str(path.parent)
    if folder not in sys.path:  # as `python file.py` would: its sibling modules import
        sys.path.insert(0, folder)
    sys.modules[name] = module  # dataclasses and pickling look their module up while it runs
    try:
        found.loader.exec_module(module)
    except (Exception, SystemExit) as e:
        sys.modules.pop(name, None)
        raise InputError(
            f"{spec.text}: running {spec.file} failed ({_one_line(e)})",
            "fix the file; it runs as Python code",
        ) from e
    return module


def _import_module(spec: FactorySpec) -> ModuleType:
    assert spec.module is not None
    name = spec.module
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:  # as `python -m` would: the current directory first
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            raise InputError(
                f"{spec.text}: no module named {e.name!r}",
                "run condcli from the folder that holds it, install it,"
                " or name its file (path/to/file.py:factory)",
            ) from None
        raise InputError(f"{spec.text}: importing {name} failed ({_one_line(e)})", "fix the module") from e
    except (Exception, SystemExit) as e:
        raise InputError(f"{spec.text}: importing {name} failed ({_one_line(e)})", "fix the module") from e


def _factory(spec: FactorySpec, module: ModuleType) -> Callable[..., Any]:
    found: Any = module
    for part in spec.attr.split("."):
        if not hasattr(found, part):
            public = sorted(
                n
                for n, v in vars(module).items()
                if callable(v) and not n.startswith("_") and n[:1].islower()
            )
            shown = ", ".join(public[:6]) if public else "none"
            raise InputError(
                f"{spec.text}: {spec.where} has no attribute {spec.attr!r}",
                f"name the function that builds the model (its functions: {shown})",
            )
        found = getattr(found, part)
    if not callable(found):
        raise InputError(
            f"{spec.text}: {spec.attr} is an object of type {type(found).__name__}, not a function",
            "name a function (or class) that returns the model",
        )
    return found  # type: ignore[no-any-return]


def _check_arguments(spec: FactorySpec, factory: Callable[..., Any], kwargs: Mapping[str, Any]) -> None:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: the call itself will say
        return
    try:
        signature.bind(**kwargs)
    except TypeError as e:
        takes = ", ".join(signature.parameters) or "no arguments"
        raise UsageError(
            f"{spec.text}: {spec.attr}() does not take these `model_args` ({e})", f"it takes: {takes}"
        ) from None


def _call(
    spec: FactorySpec, module: ModuleType, factory: Callable[..., Any], kwargs: Mapping[str, Any]
) -> Any:
    try:
        return factory(**kwargs)
    except (Exception, SystemExit) as e:
        where = _where_raised(e, getattr(module, "__file__", None))
        raise InputError(
            f"{spec.text}: {spec.attr}() raised {_one_line(e)}{where}", "fix the factory or its `model_args`"
        ) from e


def build_factory(spec: FactorySpec, kwargs: Mapping[str, Any]) -> nn.Module:
    """Import the factory's file or module (running it), call ``factory(**kwargs)`` and check the result."""
    check_file(spec)
    with redirect_stdout(sys.stderr):  # what the user's code prints never mixes with a --json report
        module = _import_file(spec) if spec.file is not None else _import_module(spec)
        factory = _factory(spec, module)
        _check_arguments(spec, factory, kwargs)
        model = _call(spec, module, factory, kwargs)
    if not isinstance(model, nn.Module):
        raise InputError(
            f"{spec.text}: {spec.attr}() returned an object of type {type(model).__name__}, not an nn.Module",
            "return the model itself",
        )
    return model


def describe_call(spec: FactorySpec, kwargs: Mapping[str, Any]) -> str:
    """``build(depth=2, name='s')`` as the factory was called."""
    return f"{spec.attr}(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"


def _as_size(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, value
    if isinstance(value, tuple | list) and len(value) in (2, 3):
        *_, h, w = value
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (h, w)):
            return int(h), int(w)
    return None


def declared_size(model: nn.Module) -> tuple[tuple[int, int], str] | None:
    """The image size a plain module declares and where: an ``img_size`` or ``image_size`` attribute
    (H, (H, W) or (C, H, W)), a timm PatchEmbed's ``patch_embed.img_size``, or the
    ``input_size`` of a timm-style ``pretrained_cfg``/``default_cfg`` dict."""
    owners: list[tuple[str, Any]] = [(type(model).__name__, model)]
    patch = getattr(model, "patch_embed", None)
    if isinstance(patch, nn.Module):
        owners.append((f"{type(model).__name__}.patch_embed", patch))
    for owner, obj in owners:
        for name in SIZE_ATTRIBUTES:
            size = _as_size(getattr(obj, name, None))
            if size is not None:
                return size, f"{owner}.{name}"
    for name in ("pretrained_cfg", "default_cfg"):
        cfg = getattr(model, name, None)
        size = _as_size(cfg.get("input_size")) if isinstance(cfg, Mapping) else None
        if size is not None:
            return size, f"{type(model).__name__}.{name}['input_size']"
    return None


def factory_preprocessing(model: nn.Module, text: str) -> Preprocessing:
    """timm's eval transforms for a plain module's images at the size it declares (:func:`declared_size`);
    mean, std and crop from its ``pretrained_cfg`` where it has one, else timm's (ImageNet) defaults."""
    from timm.data import create_transform, resolve_data_config

    found = declared_size(model)
    if found is None:
        raise InputError(
            f"{text}: the model declares no input size, so condcli cannot size its images",
            "set it on the module the factory returns, e.g. model.img_size = 224 (or (H, W)), or give it a "
            "timm-style pretrained_cfg = {'input_size': (3, H, W), 'mean': …, 'std': …}",
        )
    (h, w), where = found
    cfg = resolve_data_config({"input_size": (3, h, w)}, model=model)
    own = any(isinstance(getattr(model, n, None), Mapping) for n in ("pretrained_cfg", "default_cfg"))
    mean = ", ".join(f"{v:.3g}" for v in cfg["mean"])
    std = ", ".join(f"{v:.3g}" for v in cfg["std"])
    describe = (
        f"timm eval transforms: input {h}×{w} (from {where}), {cfg['interpolation']} interpolation, "
        f"crop_pct {cfg['crop_pct']}, mean ({mean}), std ({std})"
        + ("" if own else " — timm's defaults: the model declares no pretrained_cfg")
    )
    return Preprocessing("images", describe, image_transform=create_transform(**cfg), image_size=(h, w))
