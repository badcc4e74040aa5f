"""A ``checkpoint`` file: read a state dict safely and fit it to an architecture, or say exactly why not.

Only safetensors or ``torch.load(weights_only=True)``: a pickle that would run code is refused.
"""

from __future__ import annotations

import pickle
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from condcli.errors import InputError

SAFE_SUFFIXES = (".safetensors",)
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module", "state_dict_ema", "model_ema")
SHOW = 3  # keys listed in a mismatch message


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors or .pt/.pth/.bin/.ckpt file, unwrapped from common training wrappers."""
    if not path.is_file():
        raise InputError(f"`checkpoint={path}`: no such file", "give the path of a .safetensors or .pt file")
    suffix = path.suffix.lower()
    if suffix in SAFE_SUFFIXES:
        raw: Any = _read_safetensors(path)
    elif suffix in PICKLE_SUFFIXES:
        raw = _read_pickle(path)
    else:
        raise InputError(
            f"`checkpoint={path}`: unsupported file type {suffix or '(none)'!r}",
            "give a .safetensors file or a .pt/.pth/.bin state dict",
        )
    return _unwrap(raw, path)


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise InputError(
            f"`checkpoint={path}` is not a readable safetensors file ({e})", "re-export it with safetensors"
        ) from e


def _unpickler_reason(e: BaseException) -> str:
    """The weights-only unpickler's own reason, without torch's advice to turn the protection off."""
    text = str(e)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


CODE_OPCODES = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX"}


def _imports_code(path: Path) -> bool:
    """Whether a plain (non-zip) pickle file imports or calls anything — what a code-running pickle does."""
    import pickletools

    if zipfile.is_zipfile(path):
        return False  # torch's zip format: the weights-only unpickler has already named the global
    try:
        with path.open("rb") as fh:
            return any(op.name in CODE_OPCODES for op, _, _ in pickletools.genops(fh))
    except Exception:  # not a pickle at all: the caller reports it as unreadable
        return False


def _read_pickle(path: Path) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols; the error says enough
            return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        reason = _unpickler_reason(e)
        if reason.startswith(("Unsupported global", "Unsupported class", "Trying to")) or _imports_code(path):
            raise InputError(
                f"refusing to load {path}: it is a pickle that would run code or build arbitrary objects"
                f" ({reason})",
                "save only the tensors (torch.save(model.state_dict(), …) or safetensors) and try again",
            ) from e
        raise InputError(
            f"`checkpoint={path}` is not a readable PyTorch file ({reason})",
            "give a file written by torch.save(model.state_dict(), …) or a .safetensors file",
        ) from e
    except (RuntimeError, OSError, EOFError, ValueError) as e:
        raise InputError(
            f"`checkpoint={path}` is not a readable PyTorch file ({type(e).__name__}: {e})",
            "give a file written by torch.save(model.state_dict(), …) or a .safetensors file",
        ) from e


def _unwrap(raw: Any, path: Path) -> dict[str, torch.Tensor]:
    while isinstance(raw, Mapping) and not _is_tensor_dict(raw):
        inner = next((raw[k] for k in WRAPPER_KEYS if k in raw and isinstance(raw[k], Mapping)), None)
        if inner is None:
            break
        raw = inner
    if not isinstance(raw, Mapping) or not _is_tensor_dict(raw):
        raise InputError(
            f"`checkpoint={path}` holds no state dict (a mapping of parameter names to tensors)",
            "save model.state_dict(), not the model object or an optimizer",
        )
    sd = {str(k): v for k, v in raw.items() if isinstance(v, torch.Tensor)}
    if sd and all(k.startswith("module.") for k in sd):  # saved from DistributedDataParallel
        sd = {k[len("module.") :]: v for k, v in sd.items()}
    return sd


def _is_tensor_dict(raw: Mapping[Any, Any]) -> bool:
    return len(raw) > 0 and any(isinstance(v, torch.Tensor) for v in raw.values())


def _candidates(sd: dict[str, torch.Tensor], model: nn.Module) -> list[dict[str, torch.Tensor]]:
    """The state dict as given, then with an HF base-model prefix removed or added."""
    out = [sd]
    prefix = getattr(model, "base_model_prefix", "")
    if prefix:
        p = prefix + "."
        if any(k.startswith(p) for k in sd):
            out.append({k[len(p) :] if k.startswith(p) else k: v for k, v in sd.items()})
        else:
            out.append({p + k: v for k, v in sd.items()})
    return out


def _first(keys: list[str]) -> str:
    shown = ", ".join(keys[:SHOW])
    return shown + (", …" if len(keys) > SHOW else "")


def load_into(model: nn.Module, sd: dict[str, torch.Tensor], path: Path, arch: str) -> None:
    """Load ``sd`` into ``model`` strictly; a mismatch is one error naming the first bad keys."""
    expected = model.state_dict()
    best = min(_candidates(sd, model), key=lambda c: len(set(expected) ^ set(c)))
    missing = sorted(set(expected) - set(best))
    unexpected = sorted(set(best) - set(expected))
    shapes = [
        f"{k} {tuple(best[k].shape)} vs {tuple(expected[k].shape)}"
        for k in sorted(set(best) & set(expected))
        if best[k].shape != expected[k].shape
    ]
    # buffers that models recompute (e.g. HF position_ids) may be absent from a checkpoint
    params = {name for name, _ in model.named_parameters()}
    missing = [k for k in missing if k in params or not k.endswith("position_ids")]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s) ({_first(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected key(s) ({_first(unexpected)})")
        if shapes:
            parts.append(f"{len(shapes)} shape mismatch(es) ({_first(shapes)})")
        raise InputError(
            f"`checkpoint={path}` does not fit {arch}: " + "; ".join(parts),
            "pass as MODEL the architecture (and size) this checkpoint was trained with",
        )
    model.load_state_dict(best, strict=False)
