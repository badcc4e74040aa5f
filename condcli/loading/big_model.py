"""Models bigger than one device: accelerate's big-model inference (``device_map``, ``max_memory``).

A :class:`Placement` says how to spread a model: a strategy (``auto``/``balanced``, ``balanced_low_0``,
``sequential``, as transformers names them) and a memory budget per device (``GPU0=20GiB,cpu=60GiB,disk``).
:func:`dispatch` computes the device map with accelerate (blocks are never split) and dispatches the built
model: accelerate's hooks (``AlignDevicesHook``) move each block's inputs to its device, and load the weights
of a block offloaded to the CPU or to disk just for its forward. Disk offload goes to a temporary folder that
is removed with the model, at exit, or at once where dispatching fails; it is used only where ``disk`` is in
the budget.

The analysis runs on one math device (:func:`main_device`: the first GPU of the map, else the CPU): capture
moves every captured tensor there, and :func:`materialized` brings an offloaded block's weights back for the
W slices, so that a split model's report is the unsplit model's.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import HeadWeights, LayerSpec
from condcli.errors import InputError, UsageError

STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
MAX_BYTES = 2**50  # 1 PiB: more than any machine has; a larger budget is a typo
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?", re.IGNORECASE)
GPU = re.compile(r"(?:gpu|cuda:?)?(\d+)", re.IGNORECASE)
Budget = dict[int | str, int]  # accelerate's max_memory: GPU index / "cpu" → bytes
_MAIN: weakref.WeakKeyDictionary[nn.Module, torch.device] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Placement:
    """How to spread a model over devices."""

    strategy: str  # one of STRATEGIES (auto is balanced, as in transformers)
    max_memory: Budget | None  # None: accelerate's defaults (the free memory of every GPU and of the CPU)
    disk: bool  # offloading to disk is allowed (``disk`` in the budget)


def parse_size(text: str, where: str) -> int:
    """``20GiB``, ``1.5GB``, ``512MiB`` or a number of bytes → bytes (positive, at most 1 PiB)."""
    match = SIZE.fullmatch(text.strip())
    text = text if len(text) <= 24 else text[:20] + "…"  # as the error line shows it
    if match is None:
        raise UsageError(
            f"`max_memory`: {where}={text!r} is not a size", "write e.g. 20GiB, 1.5GB, 512MiB or bytes"
        )
    number, unit = match.groups()
    if unit is None and "." in number:
        raise UsageError(f"`max_memory`: {where}={text!r}: a number of bytes is whole", "e.g. 512MiB")
    if len(number) > 40:  # digits beyond any budget
        number = "9" * 40
    value = int(Decimal(number) * UNITS[(unit or "b").lower()])
    if not 0 < value <= MAX_BYTES:
        raise UsageError(
            f"`max_memory`: {where}={text!r} is {'zero' if value <= 0 else 'more than 1 PiB'}",
            "give each device a positive budget it has, e.g. cpu=16GiB",
        )
    return value


def _device_key(name: str) -> int | str:
    key = name.strip().lower()
    if key in ("cpu", "disk"):
        return key
    match = GPU.fullmatch(key)
    if match is None:
        raise UsageError(
            f"`max_memory`: unknown device {name!r}", "name GPU0 (or 0, cuda:0), cpu or disk, e.g. GPU0=20GiB"
        )
    index = int(match.group(1))
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if index >= count:
        have = f"{count} GPU(s)" if count else "no GPU"
        raise UsageError(f"`max_memory`: {name} is not on this machine ({have})", "budget the devices it has")
    return index


def parse_max_memory(text: str) -> tuple[Budget, bool]:
    """``GPU0=20GiB,cpu=60GiB,disk`` → ({0: bytes, "cpu": bytes}, disk allowed)."""
    budget: Budget = {}
    disk = False
    for part in text.split(","):
        name, eq, size = part.partition("=")
        key = _device_key(name) if name.strip() else ""
        if key == "":
            raise UsageError(f"`max_memory`: an empty entry in {text!r}", "e.g. GPU0=20GiB,cpu=60GiB,disk")
        if key in budget or (key == "disk" and disk):
            raise UsageError(f"`max_memory`: {name.strip()} is given twice", "give each device once")
        if key == "disk":
            if eq:
                raise UsageError(
                    "`max_memory`: disk takes no size (it is bounded by the disk)",
                    "write disk alone, e.g. cpu=8GiB,disk",
                )
            disk = True
            continue
        if not eq:
            raise UsageError(f"`max_memory`: {name.strip()} has no size", f"write e.g. {name.strip()}=8GiB")
        budget[key] = parse_size(size, name.strip())
    if not budget:
        raise UsageError("`max_memory` budgets no GPU and no CPU", "add e.g. cpu=8GiB before disk")
    return budget, disk


def placement(device_map: str | None, max_memory: str | None, device: str = "auto") -> Placement | None:
    """The placement asked for (None: the whole model on ``device``), checked."""
    if device_map is None:
        if max_memory is not None:
            raise UsageError("`max_memory` is given without `device_map`", "add `device_map=auto`")
        return None
    strategy = device_map.strip().lower()
    if strategy not in STRATEGIES:
        raise UsageError(
            f"`device_map={device_map}` is not known",
            f"use one of {', '.join(STRATEGIES)}; a single device is `device`",
        )
    if device.strip().lower() != "auto":
        raise UsageError(
            f"`device={device}` and `device_map` are both given",
            "leave `device` out: the device map decides; the analysis runs on its first GPU, else the CPU",
        )
    if max_memory is None:
        return Placement(strategy, None, False)
    budget, disk = parse_max_memory(max_memory)
    return Placement(strategy, budget, disk)


def no_split(model: nn.Module, blocks: Collection[str]) -> list[str]:
    """The module classes never split over devices: the blocks at ``blocks`` (module paths) and what a
    transformers model declares (``_no_split_modules``)."""
    names = {type(model.get_submodule(path)).__name__ for path in blocks if path}
    declared = getattr(model, "_no_split_modules", None) or []
    return sorted(names | {n for n in declared if isinstance(n, str)})


def device_map_for(
    model: nn.Module, where: Placement, blocks: Collection[str], dtype: torch.dtype | None = None
) -> dict[str, int | str]:
    """The device of each module of ``model`` (module path → GPU index, "cpu" or "disk"); ``dtype``: what its
    weights will be cast to."""
    from accelerate.utils import get_balanced_memory, get_max_memory, infer_auto_device_map

    keep = no_split(model, blocks)
    budget = get_max_memory(dict(where.max_memory) if where.max_memory is not None else None)
    if where.strategy != "sequential":
        budget = get_balanced_memory(
            model,
            budget,
            no_split_module_classes=keep,
            dtype=dtype,
            low_zero=where.strategy == "balanced_low_0",
        )
    with warnings.catch_warnings():  # a parameter of the root (timm's cls_token) is not a submodule: fine
        warnings.simplefilter("ignore", UserWarning)
        found: dict[str, int | str] = dict(
            infer_auto_device_map(model, budget, no_split_module_classes=keep, dtype=dtype)
        )
    main = _main(found)
    for name in list(found):  # a tensor of a split module, not a module: accelerate places it on the main
        if _is_tensor(model, name):  # device with its module's hook, so it cannot stay offloaded
            found[name] = _accelerate_name(main)
    if "disk" in found.values() and not where.disk:
        raise InputError(
            "the model does not fit in the memory budgeted for it"
            + ("" if where.max_memory is None else " (`max_memory`)"),
            "give the devices more (`max_memory`), or allow offloading to disk: add disk to `max_memory`",
        )
    if found.get("") == "disk":
        raise InputError(
            "`max_memory` leaves no device room for any part of the model",
            "budget at least its largest block on the CPU or a GPU (a disk block is loaded there to run)",
        )
    return found


def _is_tensor(model: nn.Module, name: str) -> bool:
    owner, _, leaf = name.rpartition(".")
    try:
        module = model.get_submodule(owner)
    except AttributeError:
        return False
    return leaf in module._parameters or leaf in module._buffers


def _accelerate_name(device: torch.device) -> int | str:
    """As accelerate compares devices: "cpu" (a torch.device is not equal to it), or the GPU's index."""
    return device.index or 0 if device.type == "cuda" else "cpu"


def _main(found: Mapping[str, int | str]) -> torch.device:
    gpus = sorted(d for d in found.values() if isinstance(d, int))
    return torch.device("cuda", gpus[0]) if gpus else torch.device("cpu")


def dispatch(model: nn.Module, where: Placement, blocks: Collection[str]) -> dict[str, str]:
    """Spread the built ``model`` as ``where`` says (in place); returns its device map (module → device)."""
    from accelerate import dispatch_model

    found = device_map_for(model, where, blocks)
    folder = tempfile.mkdtemp(prefix="condcli-offload-") if "disk" in found.values() else None
    try:
        main = _main(found)
        with quiet(), warnings.catch_warnings():  # it warns that offloaded weights are on meta: as meant
            warnings.simplefilter("ignore", UserWarning)
            dispatch_model(
                model,
                found,
                main_device=_accelerate_name(main),
                offload_dir=folder,
                force_hooks=True,
                # an offloaded block loads all its weights as it starts: a block may read a submodule's
                # weight without calling it (timm EVA's qkv with its own bias)
                preload_module_classes=no_split(model, blocks),
            )
    except BaseException:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if folder is not None:  # removed with the model, else at exit (also after an error or Ctrl-C)
        weakref.finalize(model, shutil.rmtree, folder, ignore_errors=True)
    _MAIN[model] = main
    return {name: _device_name(d) for name, d in found.items()}


@dataclass
class Streamed:
    """A transformers model read straight onto its devices: the ``from_pretrained`` keywords, then
    :meth:`done` with the loaded model."""

    where: Placement
    found: dict[str, int | str]
    folder: str | None  # the disk offload folder

    def kwargs(self, dtype: torch.dtype | None) -> dict[str, Any]:
        import transformers

        out: dict[str, Any] = {"device_map": dict(self.found), "offload_folder": self.folder}
        if dtype is not None:
            new = tuple(int(p) for p in transformers.__version__.split(".")[:2]) >= (4, 56)
            out["dtype" if new else "torch_dtype"] = dtype
        return out

    def done(self, analysed: nn.Module) -> dict[str, str]:
        """Register ``analysed`` (the module condcli runs) as dispatched; its device map."""
        if self.folder is not None:
            weakref.finalize(analysed, shutil.rmtree, self.folder, ignore_errors=True)
        _MAIN[analysed] = _main(self.found)
        return {name: _device_name(d) for name, d in self.found.items()}

    def failed(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def stream(cls: Any, config: Any, where: Placement, dtype: torch.dtype | None) -> Streamed:
    """The device map of transformers class ``cls`` with ``config`` (built on the meta device: no memory),
    its blocks whole (``_no_split_modules``), and the disk folder where it offloads."""
    from accelerate import init_empty_weights

    with init_empty_weights(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        meta = cls._from_config(config)
    with quiet():  # "the model weights are not tied": transformers ties them as it loads
        found = device_map_for(meta, where, [], dtype)
    folder = tempfile.mkdtemp(prefix="condcli-offload-") if "disk" in found.values() else None
    return Streamed(where, found, folder)


@contextmanager
def quiet() -> Iterator[None]:
    """accelerate's warnings off (that offloaded weights sit on the meta device: as meant)."""
    log = logging.getLogger("accelerate")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _device_name(device: int | str) -> str:
    return f"cuda:{device}" if isinstance(device, int) else device


def main_device(model: nn.Module) -> torch.device:
    """The device the analysis of ``model`` runs on: a dispatched model's main device, else where its first
    parameter lives."""
    found = _MAIN.get(model)
    if found is not None:
        return found
    return next(model.parameters()).device


def is_dispatched(model: nn.Module) -> bool:
    return model in _MAIN


@contextmanager
def materialized(module: nn.Module, device: torch.device) -> Iterator[None]:
    """``module``'s offloaded weights (CPU or disk) loaded onto ``device`` while inside; a module that is not
    offloaded is left as it is, and so is one whose weights are loaded now (inside its own forward: offloading
    them on leaving would pull them from under the rest of that forward)."""
    hooked = [sub for sub in module.modules() if hasattr(sub, "_hf_hook")]
    if not hooked:  # not dispatched (accelerate is not even imported)
        yield
        return
    from accelerate.utils import align_module_device, has_offloaded_params

    with ExitStack() as stack:
        for sub in hooked:
            if has_offloaded_params(sub) and not _loaded_now(sub):
                stack.enter_context(align_module_device(sub, device))
        yield


def _loaded_now(sub: nn.Module) -> bool:
    """Whether an offloaded module's weights are loaded now (by its running forward, or one that stopped)."""
    hook: Any = sub._hf_hook
    return any(t.device.type != "meta" for t in sub.parameters(recurse=bool(hook.place_submodules)))


def settle(model: nn.Module) -> None:
    """Offload again what a forward that stopped early left loaded: accelerate loads an offloaded module's
    weights before its forward and offloads them after it, so a forward left inside a block (condcli's early
    stop, :func:`condcli.capture.capture`) leaves that block's weights on its device. Each such module is
    offloaded as its own hook would have done (accelerate's ``align_module_device`` does the same); a model
    that is not dispatched is left as it is."""
    if not is_dispatched(model):
        return
    from accelerate.utils import has_offloaded_params

    for sub in model.modules():
        if not has_offloaded_params(sub):
            continue
        if _loaded_now(sub):
            hook: Any = sub._hf_hook
            hook.post_forward(sub, None)


def offloaded_weights(model: nn.Module, spec: LayerSpec, device: torch.device) -> Callable[[], HeadWeights]:
    """``spec.weights`` reading its block's weights back from where they were offloaded (CPU, disk): the
    block alone, else (weights that live outside it) the whole model."""
    read = spec.weights

    def weights() -> HeadWeights:
        try:
            block = model.get_submodule(spec.name)
        except AttributeError:
            block = model
        with materialized(block, device):
            found = read()
        if block is not model and _on_meta(found):
            with materialized(model, device):
                found = read()
        return found

    return weights


def _on_meta(w: HeadWeights) -> bool:
    return any(t is not None and t.device.type == "meta" for t in (w.wq, w.wk, w.wv, w.bq, w.bk, w.bv))


def describe(found: Mapping[str, str]) -> str:
    """E.g. "cpu 5 modules, disk 3 modules"."""
    counts: dict[str, int] = {}
    for device in found.values():
        counts[device] = counts.get(device, 0) + 1
    return ", ".join(f"{d} {n} module{'s' if n != 1 else ''}" for d, n in counts.items())


def summary(where: Placement, found: Mapping[str, str]) -> dict[str, Any]:
    """The report's record of the placement: strategy, budgets and the map itself."""
    budget = None
    if where.max_memory is not None:
        budget = {_device_name(k): v for k, v in where.max_memory.items()}
    return {"strategy": where.strategy, "max_memory": budget, "disk": where.disk, "modules": dict(found)}
