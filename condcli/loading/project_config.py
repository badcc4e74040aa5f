"""``[tool.condcli]`` in the current directory's pyproject.toml, and the default MODEL (docs/math.md#cli)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from condcli.errors import InputError, UsageError
from condcli.parsing import read_toml

DEFAULT_SAMPLE = "vit-plain"  # the shipped sample ViT (sample_checkpoints/vit-plain)


def tool_config(path: Path | None = None) -> dict[str, Any]:
    """The ``[tool.condcli]`` table ({} when there is no pyproject.toml or no such table)."""
    file = path or Path.cwd() / "pyproject.toml"
    try:
        if not file.is_file():
            return {}
    except (OSError, ValueError):  # a name the file system cannot hold: no such file
        return {}
    data = read_toml(file, str(file), "fix the file or run condcli from another folder")
    table: Any = data
    for key in ("tool", "condcli"):
        if not isinstance(table, dict):
            break
        table = table.get(key, {})
    if not isinstance(table, dict):
        raise UsageError(
            f"[tool.condcli] in {file} is not a table", "write it as [tool.condcli] with keys below"
        )
    return table


def resolve_model(given: str | None, path: Path | None = None) -> tuple[str, str]:
    """(MODEL, where it came from): the argument, ``[tool.condcli] model``, or the shipped sample ViT.

    An empty or blank MODEL is refused (an unset variable, ``condcli check "$MODEL"``), never read as "none
    given": that would analyse the default and pass in CI.
    """
    if given is not None:
        if not given.strip():
            raise UsageError(
                f"`model` is empty ({given!r}; an unset variable in a script or CI job?)",
                "give a model, or drop the argument to use [tool.condcli] model or the shipped sample ViT",
            )
        return given, "command line"
    model = tool_config(path).get("model")
    if model is not None:
        if not isinstance(model, str) or not model.strip():
            raise UsageError(
                "[tool.condcli] model must be a non-empty string", 'e.g. model = "vit_base_patch16_224"'
            )
        from condcli.loading.factory import rebased

        folder = (path or Path.cwd() / "pyproject.toml").parent  # a factory file is relative to it
        return rebased(model.strip(), folder), "[tool.condcli] model in pyproject.toml"
    from condcli.loading.samples import restore_hint, sample_names

    if DEFAULT_SAMPLE not in sample_names():
        raise InputError(
            f"no MODEL given and the default sample checkpoint {DEFAULT_SAMPLE!r} is not installed",
            f"pass MODEL, e.g. 'vit_tiny_patch16_224 `weights=random`', or {restore_hint()}",
        )
    return DEFAULT_SAMPLE, "the shipped sample ViT (default)"


def configured_model_args(given: str | None, path: Path | None = None) -> dict[str, Any]:
    """``[tool.condcli] model_args``: the keyword arguments of a factory ``model`` there, used only when
    that model is (no MODEL ``given``); {} without the table."""
    table = tool_config(path)
    args = table.get("model_args")
    if args is None:
        return {}
    if not isinstance(args, dict) or not all(isinstance(k, str) and k.isidentifier() for k in args):
        raise UsageError(
            "[tool.condcli] model_args must be a table of keyword arguments",
            "e.g. model_args = { depth = 4 }",
        )
    from condcli.loading.factory import parse_factory

    model = table.get("model")
    if not isinstance(model, str) or parse_factory(model.strip()) is None:
        raise UsageError(
            "[tool.condcli] model_args is given, but [tool.condcli] model is not a factory",
            'model_args go to model = "path/to/file.py:factory" or "package.module:factory"',
        )
    return {} if given is not None else dict(args)
