"""How big a model its config.json asks for, known before anything is allocated: refuse what cannot fit.

A config's size fields are checked first (:func:`check_size_fields`: a layer count or a width must be a
non-negative integer). Then the model is built on the meta device, where a tensor has a shape but no
storage, and its parameters and buffers are summed (:func:`estimate`). Building a module is not free even
there, so a config asking for more than :data:`EXACT_UP_TO` layers (blocks) is not built as it is:
it is built with each such count at 1 and at 2, and the size is extrapolated linearly. While building,
global registration hooks stop the build as soon as the parameters already exceed the memory available or
the modules exceed :data:`MAX_MODULES`. :func:`check_fits` compares the estimate with the memory available
(RAM, an address-space limit, a cgroup limit; the device's free memory for CUDA) and refuses in one line.
"""

from __future__ import annotations

import copy
import re
import resource
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn.modules import module as torch_module

from condcli.errors import InputError

# the standard size fields (in a sub-config too): layer counts may be 0, widths must be positive
COUNT = re.compile(
    r"^(?:depths?|n_layers?|layers|num_layers|num_hidden_layers|num_blocks"
    r"|(?:num_)?(?:encoder|decoder)_layers)$"
)
WIDTH = re.compile(
    r"^(?:hidden_size|n_embd|embed_dims?|d_model|intermediate_size|n_inner|(?:type_)?vocab_size|d_ff"
    r"|(?:encoder_|decoder_)?ffn_dim|mlp_dim|num_attention_heads|n_heads?|num_heads|patch_size)$"
)
META_ERROR = re.compile(r"\bmeta (?:tensors?|device|backend)\b|'meta'|\bMeta' backend", re.IGNORECASE)
EXACT_UP_TO = 256  # a count above this is extrapolated from builds with it at 1 and 2
MAX_MODULES = 250_000  # far above any real model; building more would take minutes even on meta
MAX_DEPTH = 8  # nesting of sub-configs searched for size fields
PER_SLOT_UP_TO = 8  # extrapolated counts measured one by one (more: together, averaged)
MODULE_BYTES = 4096  # a Python module object and its dictionaries, roughly
Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Size:
    params: int
    bytes: int
    modules: int


class _Over(Exception):
    """Raised by the registration hooks to stop a build that is already too big."""

    def __init__(self, size: Size) -> None:
        super().__init__("too big")
        self.size = size


def _fields(cfg: Any, depth: int = 0, at: Path_ = ()) -> Iterator[tuple[Path_, str, Any]]:
    if depth > MAX_DEPTH or not isinstance(cfg, dict):
        return
    for key, value in cfg.items():
        if isinstance(value, dict):
            yield from _fields(value, depth + 1, (*at, key))
        elif isinstance(key, str) and (COUNT.search(key) or WIDTH.search(key)):
            yield (*at, key), key, value


def _describe(path: Path_) -> str:
    return ".".join(str(p) for p in path)


def check_size_fields(cfg: Any, where: str) -> None:
    """Each size field of ``cfg`` (a layer count, a width) is None or a non-negative integer (or a list)."""
    for path, key, value in _fields(cfg):
        items = value if isinstance(value, list) else [value]
        if isinstance(value, bool) or value is None:
            continue
        least = 0 if COUNT.search(key) or key == "type_vocab_size" else 1
        for item in items:
            if item is None or isinstance(item, bool):  # e.g. a list of per-layer switches
                continue
            if not isinstance(item, int) or item < least:
                what = "a non-negative" if least == 0 else "a positive"
                raise InputError(
                    f"{where}: '{_describe(path)}' is {item!r}, not {what} integer",
                    "fix config.json (or save the model again)",
                )


def count_slots(cfg: Any) -> list[tuple[Path_, int]]:
    """The layer counts of ``cfg`` above :data:`EXACT_UP_TO` (list entries one by one)."""
    slots: list[tuple[Path_, int]] = []
    for path, key, value in _fields(cfg):
        if not COUNT.search(key) or isinstance(value, bool):
            continue
        if isinstance(value, int) and value > EXACT_UP_TO:
            slots.append((path, value))
        elif isinstance(value, list):
            slots += [((*path, i), v) for i, v in enumerate(value) if isinstance(v, int) and v > EXACT_UP_TO]
    return slots


def with_counts(cfg: Any, counts: dict[Path_, int]) -> Any:
    """A deep copy of ``cfg`` (a dict or a config object) with the counts at ``counts`` replaced."""
    out = copy.deepcopy(cfg)
    for path, value in counts.items():
        node: Any = out
        keys: list[Any] = list(path)
        for key in keys[:-1]:
            node = node[key] if isinstance(node, (dict, list)) else getattr(node, str(key))
        last = keys[-1]
        if isinstance(node, (dict, list)):
            node[last] = value
        else:
            setattr(node, str(last), value)
    return out


@contextmanager
def _watch(budget: int | None) -> Iterator[dict[int, int]]:
    """Count bytes of parameters/buffers and modules registered while building; stop the build past limits."""
    seen: dict[int, int] = {}
    modules = [0]

    def over() -> None:
        total = sum(seen.values()) + modules[0] * MODULE_BYTES
        if (budget is not None and total > budget) or modules[0] > MAX_MODULES:
            raise _Over(Size(-1, total, modules[0]))

    def tensor(_m: Any, _name: str, t: Any) -> None:
        if isinstance(t, torch.Tensor):
            seen[id(t)] = t.numel() * t.element_size()
            over()

    def module(_m: Any, _name: str, _sub: Any) -> None:
        modules[0] += 1
        over()

    handles = [
        torch_module.register_module_parameter_registration_hook(tensor),
        torch_module.register_module_buffer_registration_hook(tensor),
        torch_module.register_module_module_registration_hook(module),
    ]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def _measure(build: Callable[[], Any], budget: int | None, dtype: torch.dtype | None) -> Size:
    with _watch(budget), torch.device("meta"):
        model = build()
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}.values()
    size = sum(t.numel() * t.element_size() for t in tensors)
    if dtype is not None:  # cast later: the larger of the two
        floats = [t for t in tensors if t.is_floating_point()]
        built = sum(t.numel() * t.element_size() for t in floats)
        size = max(size, size - built + sum(t.numel() for t in floats) * dtype.itemsize)
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    n_modules = sum(1 for _ in model.modules())
    return Size(params, size + n_modules * MODULE_BYTES, n_modules)


def estimate(
    build: Callable[[Any], Any], cfg: Any, raw: Any, budget: int | None, dtype: torch.dtype | None = None
) -> Size | None:
    """The size of ``build(cfg)`` (on the meta device); ``raw``: cfg as a dict, where the counts are found.

    None where the model cannot be built on the meta device and no count needed extrapolating. Raises
    :class:`_Over` (caught by :func:`check_fits`) as soon as the build exceeds ``budget`` bytes."""
    slots = count_slots(raw)
    if not slots:
        try:
            return _measure(lambda: build(cfg), budget, dtype)
        except _Over:
            raise
        except Exception as e:
            if _meta_only(e):
                return None
            raise
    ones = {path: 1 for path, _ in slots}
    base = _measure(lambda: build(with_counts(cfg, ones)), budget, dtype)
    groups = [[p] for p, _ in slots] if len(slots) <= PER_SLOT_UP_TO else [[p for p, _ in slots]]
    params, size, modules = base.params, base.bytes, base.modules
    for group in groups:
        twos = with_counts(cfg, {**ones, **dict.fromkeys(group, 2)})
        two = _measure(lambda: build(twos), budget, dtype)  # noqa: B023 - called at once
        extra = sum(value - 1 for path, value in slots if path in group) / len(group)
        params += int((two.params - base.params) * extra)
        size += int((two.bytes - base.bytes) * extra)
        modules += int((two.modules - base.modules) * extra)
    return Size(params, size, modules)


def _meta_only(e: BaseException) -> bool:
    """An error of the meta device itself (a model that reads a tensor's values while it is built)."""
    return isinstance(e, NotImplementedError) or META_ERROR.search(str(e)) is not None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _address_space_left() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return max(0, soft - int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_left() -> int | None:
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text().strip()))
    except (OSError, ValueError):
        return None


def available_memory(device: torch.device) -> tuple[int, str] | None:
    """The least memory free for the model, and what limits it; None where nothing can be read."""
    found = [
        (n, label)
        for n, label in (
            (_meminfo_available(), "RAM available"),
            (_address_space_left(), "left under the address-space limit (ulimit -v)"),
            (_cgroup_left(), "left under the cgroup memory limit"),
        )
        if n is not None
    ]
    if device.type == "cuda" and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(device)
        found.append((int(free), f"free on {device}"))
    return min(found) if found else None


def _gib(n: int) -> str:
    if n >= 2**40:
        return f"{n / 2**40:.3g} TiB"
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def check_fits(
    build: Callable[[Any], Any],
    cfg: Any,
    raw: Any,
    where: str,
    device: torch.device,
    dtype: torch.dtype | None = None,
    *,
    spill: bool = False,
) -> Size | None:
    """Refuse (exit 2) the model ``build(cfg)`` where its estimated size exceeds the memory available.

    ``where`` names the config (e.g. "folder/config.json"); a model the meta device cannot build
    and no count made too big passes unchecked (None). ``spill``: the weights are read onto a device map
    (GPUs, CPU, disk) that decides itself whether they fit, so the memory is not compared (the module
    count still is)."""
    check_size_fields(raw, where)
    free = None if spill else available_memory(device)
    budget = None if free is None else free[0]
    slots = count_slots(raw)
    fields = ", ".join(f"{_describe(p)} = {v}" for p, v in sorted(slots, key=lambda s: -s[1])[:3])
    try:
        size = estimate(build, cfg, raw, budget, dtype)
    except _Over as e:
        size, bound = e.size, True
    except Exception as e:
        if slots and _meta_only(e):
            raise InputError(
                f"{where} asks for {fields} layers, and condcli cannot estimate the size of such a model",
                "check its layer counts",
            ) from e
        why = " ".join(str(e).split())[:200]
        raise InputError(
            f"the model {where} describes cannot be built ({type(e).__name__}: {why})",
            "install what it names"
            if isinstance(e, ImportError)
            else "fix its values (or save the model again)",
        ) from e
    else:
        bound = False
    if size is None:
        return None
    more = f"check its size fields{f' ({fields})' if fields else ''}"
    if free is not None and size.bytes > free[0]:
        amount = (
            f"at least {_gib(size.bytes)}"
            if bound
            else f"about {size.params:.3g} parameters ({_gib(size.bytes)})"
        )
        raise InputError(
            f"{where} asks for a model of {amount}, more than the {_gib(free[0])} {free[1]}",
            f"{more}, or run on a machine with more memory",
        )
    if size.modules > MAX_MODULES:
        raise InputError(
            f"{where} asks for a model of {'more than ' if bound else ''}{size.modules:,} modules", more
        )
    return size
