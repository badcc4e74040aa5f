"""The shipped sample checkpoints (``condcli/sample_checkpoints/``, package data installed with condcli):
where they are, what their metadata says.

A sample is a normal model folder (timm ``save_for_hf`` or HF ``save_pretrained`` layout) with a
``metadata.json`` that says how it was trained (``python -m samplegen.build`` in a clone), its held-out
metric, its seed and the condcli version. A sample trained with conditioned tokens records
``conditioning: {lambda, mode}``; loading it re-applies X + λ·I_k at its embedding point, because the shift
has no weights to save.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from condcli.errors import InputError
from condcli.parsing import read_json

SAMPLES_ENV = "CONDCLI_SAMPLES"
METADATA = "metadata.json"


def samples_dir() -> Path:
    """Where the sample checkpoints live: beside the installed package, unless ``$CONDCLI_SAMPLES`` names
    another folder (e.g. samples rebuilt elsewhere)."""
    env = os.environ.get(SAMPLES_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[1] / "sample_checkpoints"


def restore_hint() -> str:
    """What a user can do when the samples are missing or damaged: unset ``$CONDCLI_SAMPLES`` if it points
    elsewhere; rebuild them where ``samplegen`` exists (a clone); else reinstall condcli (a pip install)."""
    if os.environ.get(SAMPLES_ENV):
        return (
            f"unset {SAMPLES_ENV} to use the samples installed with condcli, or point it at a sample folder"
        )
    if find_spec("samplegen") is not None:
        return "rebuild the samples with 'python -m samplegen.build'"
    return "reinstall condcli: pip install --force-reinstall --no-deps condcli"


def sample_names() -> list[str]:
    """Names of the sample folders (sub-folders with a config.json)."""
    root = samples_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "config.json").is_file())


def read_metadata(folder: Path) -> dict[str, Any] | None:
    """The folder's metadata.json, or None when it has none (any model folder may be loaded)."""
    file = folder / METADATA
    if not file.is_file():
        return None
    data = read_json(file, str(file), _fix_hint())
    if not isinstance(data, dict):
        raise InputError(f"{file} is not a JSON object", _fix_hint())
    return data


def _fix_hint() -> str:
    return f"fix the file, or if it is a shipped sample's, {restore_hint()}"


def builtin_conditioning(folder: Path) -> tuple[float, str] | None:
    """(λ, mode) when the folder's model was trained with conditioned tokens, else None."""
    return _conditioning(read_metadata(folder), folder)


def _conditioning(meta: dict[str, Any] | None, folder: Path) -> tuple[float, str] | None:
    """The ``conditioning`` entry of a folder's metadata, checked."""
    cond = None if meta is None else meta.get("conditioning")
    if cond is None:
        return None
    lam, mode = (cond.get("lambda"), cond.get("mode", "shift")) if isinstance(cond, dict) else (None, None)
    if not isinstance(lam, (int, float)) or isinstance(lam, bool) or mode not in ("shift", "correction"):
        raise InputError(
            f'{folder / METADATA}: \'conditioning\' must be {{"lambda": number, "mode": "shift"}}',
            _fix_hint(),
        )
    return float(lam), str(mode)


@dataclass(frozen=True)
class SampleInfo:
    """One row of ``condcli models``."""

    name: str
    path: Path
    architecture: str
    task: str
    metric: str  # e.g. "accuracy" or "loss (nats/token)"
    value: float | None
    conditioning: str | None  # e.g. "X + 10·I_k", None for a plain model
    size_bytes: int
    description: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "architecture": self.architecture,
            "task": self.task,
            "heldout": {"metric": self.metric, "value": self.value},
            "conditioning": self.conditioning,
            "size_bytes": self.size_bytes,
            "description": self.description,
        }


def _info(folder: Path) -> SampleInfo:
    meta = read_metadata(folder) or {}
    found = meta.get("heldout")
    held: dict[str, Any] = found if isinstance(found, dict) else {}
    value = held.get("value")
    cond = _conditioning(meta, folder)
    return SampleInfo(
        name=folder.name,
        path=folder,
        architecture=str(meta.get("architecture", "?")),
        task=str(meta.get("task", "?")),
        metric=str(held.get("metric", "?")),
        value=float(value) if isinstance(value, (int, float)) else None,
        conditioning=None if cond is None else (f"X + {cond[0]:g}·I_k" if cond[1] == "shift" else "X + C"),
        size_bytes=sum(f.stat().st_size for f in folder.iterdir() if f.is_file()),
        description=str(meta.get("description", "no metadata.json")),
    )


def list_samples() -> list[SampleInfo]:
    """Every shipped sample, by name."""
    return [_info(samples_dir() / name) for name in sample_names()]
