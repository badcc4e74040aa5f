"""A model's config.json, checked before anything is built: readable, a known kind, sane sizes.

A MODEL folder's config.json is read with :mod:`condcli.parsing` (a file that is not JSON, not UTF-8 or
nested too deeply is one error naming it). Its kind (timm ``architecture`` or HF ``model_type``), a timm
architecture timm knows, and the size the model would take (:mod:`condcli.loading.model_size`) are checked
here, so
what would fail or exhaust memory half-way through a build is refused in one line naming the file.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import torch

from condcli.errors import InputError
from condcli.loading.hf import hf_model
from condcli.loading.model_size import check_fits, check_size_fields
from condcli.parsing import read_json

RESAVE = "give a folder saved with save_pretrained (transformers) or save_for_hf (timm)"


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's config.json as a dict (any failure is one InputError naming the file)."""
    file = folder / "config.json"
    cfg = read_json(file, str(file), "fix or regenerate the file")
    if not isinstance(cfg, dict):
        raise InputError(f"{file} is not a JSON object (it is {type(cfg).__name__})", RESAVE)
    return cfg


def flavour(folder: Path) -> Literal["timm", "hf"]:
    """Whether ``folder`` is a timm (``architecture``) or an HF (``model_type``) model folder. A config with
    both is transformers' (its ``TimmWrapper`` saves the timm name as ``architecture`` beside
    ``model_type: timm_wrapper``, and ``model_args`` null): timm's ``save_for_hf`` writes no model_type."""
    cfg = read_config(folder)
    if "model_type" in cfg:
        return "hf"
    if "architecture" in cfg:
        return "timm"
    raise InputError(
        f"{folder}/config.json names neither a timm 'architecture' nor an HF 'model_type'", RESAVE
    )


def check_timm_folder(folder: Path, device: torch.device, dtype: torch.dtype | None) -> None:
    """A timm folder's architecture is one timm knows, and the model its config.json asks for fits."""
    import timm

    where = str(folder / "config.json")
    cfg = read_config(folder)
    arch = cfg.get("architecture")
    if not isinstance(arch, str) or not timm.is_model(arch):
        close = difflib.get_close_matches(str(arch), timm.list_models(), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else "name a model of timm.list_models()"
        raise InputError(f"{where}: 'architecture' {arch!r} is not a timm model", hint)
    args = cfg.get("model_args", {})
    if not isinstance(args, dict):
        raise InputError(f"{where}: 'model_args' is not a JSON object", RESAVE)

    def build(model_args: dict[str, Any]) -> Any:
        return timm.create_model(f"local-dir:{folder}", pretrained=False, **model_args)

    check_size_fields(cfg, where)
    check_fits(build, args, args, where, device, dtype)


def check_hf_config(
    config: Any,
    where: str,
    target: str,
    trust: bool,
    device: torch.device,
    dtype: torch.dtype | None,
    spill: bool = False,
) -> None:
    """The HF model ``config`` describes fits in memory (built on the meta device first); ``spill``: it is
    read onto a device map, which says itself whether it fits."""

    def build(cfg: Any) -> Any:
        return hf_model(target, cfg, False, trust)[0]

    check_fits(build, config, config.to_dict(), where, device, dtype, spill=spill)


def check_raw_hf(folder: Path) -> None:
    """An HF folder's size fields are integers, before transformers reads config.json (and says less)."""
    check_size_fields(read_config(folder), str(folder / "config.json"))
