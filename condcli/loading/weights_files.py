"""Weights files, read one way: a ``checkpoint`` file and the weights of a MODEL folder go through here.

Only safetensors or ``torch.load(weights_only=True)``: a pickle that would run code is refused. Every way a
file can be wrong (missing, a folder, empty, truncated, a header that lies about its offsets or is huge, an
unsafe pickle, no state dict inside) is one :class:`InputError` naming the file and what to do.

A MODEL folder's weights are read by transformers / timm themselves; :func:`check_folder_weights` first
opens the file(s) they would read with the same readers (the safetensors header only; a pickle memory-mapped),
so a broken file gets the same message as under ``checkpoint``. :func:`check_finite` then looks at the
loaded parameters once: a NaN or Inf in a weight is the file's fault, not the inputs'.
"""

from __future__ import annotations

import pickle
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import torch
from torch import nn

from condcli.errors import InputError
from condcli.loading.safetensors_stream import REEXPORT, TensorInfo, read_header
from condcli.parsing import read_json, regular_file

SAFE_SUFFIXES = (".safetensors",)
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".tar")
WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "module", "state_dict_ema", "model_ema")
# what each library reads from a model folder, in its order of preference (timm: timm.models._hub)
HF_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TIMM_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "pytorch_model.pth",
    "model.pth",
    "open_clip_model.safetensors",
    "open_clip_pytorch_model.safetensors",
    "open_clip_pytorch_model.bin",
    "open_clip_pytorch_model.pth",
)
TIMM_SUFFIXES = (".safetensors", ".pth", ".pth.tar", ".bin")
CHUNK = 1 << 24  # elements checked at a time for NaN/Inf
NOT_REAL_FIX = "give float weights (a quantized checkpoint must be dequantized first)"


def checkpoint_label(path: Path) -> str:
    """How an error names a ``checkpoint`` file (the CLI shows its flag)."""
    return f"`checkpoint={path}`"


def read_state_dict(path: Path, label: str | None = None) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors or .pt/.pth/.bin/.ckpt file, unwrapped from common training wrappers."""
    label = label or checkpoint_label(path)
    suffix = _check_path(path, label)
    raw: Any = _read_safetensors(path, label) if suffix in SAFE_SUFFIXES else _read_pickle(path, label)
    return _unwrap(raw, path, label)


def check_weights_file(path: Path, label: str) -> dict[str, str]:
    """Open ``path`` as :func:`read_state_dict` would, cheaply (a safetensors header, a pickle mmapped).

    Returns the tensors that are not real floating point (quantized, complex, …): name → dtype."""
    suffix = _check_path(path, label)
    if suffix in SAFE_SUFFIXES:
        dtypes = _open_safetensors(path, label)
        return {k: d for k, d in dtypes.items() if not d.startswith(("F", "BF"))}
    mmap = zipfile.is_zipfile(path)  # the legacy (non-zip) format cannot be memory-mapped: read it whole
    sd = _unwrap(_read_pickle(path, label, mmap=mmap), path, label)
    return {k: str(v.dtype).replace("torch.", "") for k, v in sd.items() if not v.is_floating_point()}


def _check_path(path: Path, label: str) -> str:
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.is_file() and _suffix(p) is not None)[:3]
        hint = (
            f"give one of its weights files ({', '.join(inside)}), or the folder as MODEL if it holds a"
            " config.json"
            if inside
            else "give the path of a .safetensors or .pt file"
        )
        raise InputError(f"{label} is a folder, not a weights file", hint)
    if not path.exists():
        raise InputError(f"{label}: no such file", "give the path of a .safetensors or .pt file")
    regular_file(path, label, "give the path of a .safetensors or .pt file")  # never open a FIFO
    suffix = _suffix(path)
    if suffix is None:
        raise InputError(
            f"{label}: unsupported file type {path.suffix.lower() or '(none)'!r}",
            "give a .safetensors file or a .pt/.pth/.bin state dict",
        )
    return suffix


def _suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return suffix if suffix in SAFE_SUFFIXES + PICKLE_SUFFIXES else None


def _open_safetensors(path: Path, label: str) -> dict[str, str]:
    """A safetensors file's tensors (name → dtype, e.g. F32); its header (size, JSON, offsets) checked by
    condcli's own reader (:func:`condcli.loading.safetensors_stream.read_header`), then by the library's."""
    from safetensors import SafetensorError, safe_open

    read_header(path, label)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            return {k: str(fh.get_slice(k).get_dtype()) for k in fh.keys()}
    except (SafetensorError, OSError, ValueError, TypeError, RuntimeError) as e:
        raise _bad_safetensors(path, label, e) from e


def _bad_safetensors(path: Path, label: str, e: BaseException) -> InputError:
    why = " ".join(str(e).split())[:200] or type(e).__name__
    if path.stat().st_size == 0:
        why = "the file is empty"
    return InputError(f"{label} is not a readable safetensors file ({why})", REEXPORT)


def _read_safetensors(path: Path, label: str) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    _open_safetensors(path, label)
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, TypeError, RuntimeError) as e:
        raise _bad_safetensors(path, label, e) from e


def _unpickler_reason(e: BaseException) -> str:
    """The weights-only unpickler's own reason, without torch's advice to turn the protection off."""
    text = str(e)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    reason = lines[0] if lines else type(e).__name__
    reason = reason.split(" If this checkpoint is trusted", 1)[0].split(" Please use `torch", 1)[0]
    return "it holds more than tensors" if "weights_only" in reason else reason  # never relay that advice


CODE_OPCODES = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "NEWOBJ_EX"}
UNSAFE_MARKERS = ("Unsupported global", "Unsupported class", "Trying to", "non-allowlisted")


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


def _read_pickle(path: Path, label: str, mmap: bool = False) -> Any:
    unreadable = "give a file written by torch.save(model.state_dict(), …) or a .safetensors file"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols; the error says enough
            return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap)
    except (pickle.UnpicklingError, RuntimeError) as e:
        reason = _unpickler_reason(e)
        if any(m in str(e) for m in UNSAFE_MARKERS) or _imports_code(path):
            raise InputError(
                f"refusing to load {path}: it is a pickle that would run code or build arbitrary objects"
                f" ({reason})",
                "save only the tensors (torch.save(model.state_dict(), …) or safetensors) and try again",
            ) from e
        raise InputError(f"{label} is not a readable PyTorch file ({reason})", unreadable) from e
    except (OSError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        why = " ".join(str(e).split())[:200]
        raise InputError(
            f"{label} is not a readable PyTorch file ({type(e).__name__}: {why})", unreadable
        ) from e


def _unwrap(raw: Any, path: Path, label: str) -> dict[str, torch.Tensor]:
    while isinstance(raw, Mapping) and not _is_tensor_dict(raw):
        inner = next((raw[k] for k in WRAPPER_KEYS if k in raw and isinstance(raw[k], Mapping)), None)
        if inner is None:
            break
        raw = inner
    if not isinstance(raw, Mapping) or not _is_tensor_dict(raw):
        raise InputError(
            f"{label} holds no state dict (a mapping of parameter names to tensors)",
            "save model.state_dict(), not the model object or an optimizer",
        )
    sd = {str(k): v for k, v in raw.items() if isinstance(v, torch.Tensor)}
    if sd and all(k.startswith("module.") for k in sd):  # saved from DistributedDataParallel
        sd = {k[len("module.") :]: v for k, v in sd.items()}
    return sd


def _is_tensor_dict(raw: Mapping[Any, Any]) -> bool:
    return len(raw) > 0 and any(isinstance(v, torch.Tensor) for v in raw.values())


def folder_weights(folder: Path, flavour: str) -> tuple[list[Path], dict[str, str]]:
    """The weights file(s) transformers (``flavour="hf"``) or timm would read from ``folder``, and for a
    sharded folder its index's map of tensor names to files."""
    names = HF_FILES if flavour == "hf" else TIMM_FILES
    found = next((folder / n for n in names if (folder / n).exists()), None)
    if found is None and flavour != "hf":
        found = next((f for s in TIMM_SUFFIXES for f in sorted(folder.glob(f"*{s}"))), None)
    if found is None:
        raise InputError(
            f"{folder} has a config.json but no weights file ({', '.join(names[:3])}, …)",
            "use `weights=random` for a random-init model, or give `checkpoint=FILE` with its weights",
        )
    if found.name.endswith(".index.json"):
        index = read_json(found, f"the weights index {found}", REEXPORT)
        shards = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(shards, dict) or not all(isinstance(v, str) for v in shards.values()):
            raise InputError(f"{found} has no 'weight_map' of tensor names to files", REEXPORT)
        return [inside(folder, name, found) for name in sorted(set(shards.values()))], shards
    return [found], {}


def inside(folder: Path, name: str, index: Path) -> Path:
    """``folder / name`` for a file ``index`` names, refused unless it lies in ``folder``: a relative path
    without ``..`` whose folders (symlinks resolved) stay inside. The file itself may be a symlink, as
    every file of a hub snapshot is (into the cache's blob store)."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    escapes = not parts or PurePosixPath(name).is_absolute() or ".." in parts or ":" in parts[0]
    if not escapes:
        root = folder.resolve()
        parent = (folder / name).parent.resolve()
        escapes = parent != root and root not in parent.parents
    if escapes:
        raise InputError(
            f"{index} names {name[:200]!r}, which is not a file inside {folder}",
            "an index may name only files in its model folder: move the shards there and name them"
            " relative to it",
        )
    return folder / name


@dataclass(frozen=True)
class FolderWeights:
    """What :func:`check_folder_weights` found: the files, and where each tensor lives."""

    source: str  # the file, or the folder's files
    not_real: dict[str, str]  # tensors that are not real floating point: name → "dtype in file"
    shards: dict[str, str]  # a sharded folder's tensor name → its file
    tensors: dict[str, TensorInfo]  # every tensor of its safetensors files, from their checked headers


def check_folder_weights(folder: Path, flavour: str) -> FolderWeights:
    """Check the weights files a folder's library would read (see :func:`folder_weights`); a safetensors
    file's header is then read by condcli's own reader too, whose tensors the model is checked against
    (:mod:`condcli.loading.tensor_shapes`)."""
    files, shards = folder_weights(folder, flavour)
    index = next((folder / n for n in HF_FILES if n.endswith(".index.json") and (folder / n).is_file()), None)
    not_real: dict[str, str] = {}
    tensors: dict[str, TensorInfo] = {}
    for file in files:
        label = f"{file} (named in {index})" if shards else str(file)
        not_real.update({k: f"{d} in {file}" for k, d in check_weights_file(file, label).items()})
        if _suffix(file) in SAFE_SUFFIXES:
            tensors.update(read_header(file, label))
    source = str(files[0]) if len(files) == 1 else f"the weights files of {folder}"
    return FolderWeights(source, not_real, {k: str(folder / v) for k, v in shards.items()}, tensors)


def _matching(name: str, keys: Mapping[str, str]) -> str | None:
    """The key of a file's tensor that a model's parameter ``name`` was loaded from (prefixes aside)."""
    if name in keys:
        return name
    return next((k for k in keys if k.endswith("." + name) or name.endswith("." + k)), None)


def check_real(model: nn.Module, not_real: dict[str, str]) -> None:
    """Refuse float parameters that were loaded from tensors of another kind (quantized, complex, bool)."""
    if not not_real:
        return
    for name, p in model.named_parameters():
        if not p.is_floating_point():
            continue
        key = _matching(name, not_real)
        if key is not None:
            raise InputError(
                f"weight '{name}' is float but was loaded from '{key}' ({not_real[key]})", NOT_REAL_FIX
            )


def _non_finite(t: torch.Tensor) -> int:
    """How many entries of ``t`` are NaN or ±Inf. A finite sum settles it in one pass with no mask (0); an
    overflowing or NaN one is counted a chunk at a time."""
    flat = t.detach().reshape(-1)
    if flat.numel() and bool(torch.isfinite(flat.sum())):
        return 0
    return sum(int((~torch.isfinite(flat[i : i + CHUNK])).sum()) for i in range(0, flat.numel(), CHUNK))


def check_finite(
    model: nn.Module, source: str, after: str = "", shards: Mapping[str, str] | None = None
) -> None:
    """Refuse a model whose parameters hold NaN or Inf (buffers such as masks may hold -inf on purpose).

    ``source`` names where the weights came from, ``shards`` the file of each tensor of a sharded folder;
    ``after`` says what changed them (e.g. a dtype cast)."""
    for name, p in model.named_parameters():
        if p.device.type == "meta":  # offloaded by a device map (its weights stay on disk)
            continue
        if p.is_floating_point() or p.is_complex():
            bad = _non_finite(p)
            if bad:
                what = f"after {after}, " if after else ""
                key = _matching(name, shards or {})
                where = source if key is None or shards is None else shards[key]
                raise InputError(
                    f"{what}weight '{name}' {tuple(p.shape)} holds {bad} NaN/Inf value(s) (from {where})",
                    "use `dtype=float32`"
                    if after
                    else "the weights file is damaged: re-export or replace it",
                )
