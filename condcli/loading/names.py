"""MODEL as typed → :class:`ModelSpec`: what kind of model a name means, decided without loading anything
(docs/guides/your-own-model.md#model-names).

``timm:NAME`` and ``hf:ID`` force a source, and ``file.py:factory`` / ``package.module:factory`` is the
user's own code. Any other name is, in this order:

1. an existing file or folder;
2. a shipped sample's name;
3. a timm model name;
4. a Hugging Face hub id: ``org/name``, or a bare id (``bert-base-uncased``) that is not a near miss of a
   sample or timm name. A near miss (similarity ≥ :data:`NEAR`, ``-`` and ``_`` alike) is far more likely a
   typo than a hub model of that spelling: it is refused with "did you mean", and ``hf:NAME`` sends it to
   the hub all the same.

A name that two of these could mean is taken as the first, and :attr:`ModelSpec.note` says so in one line
with how to ask for the other. That a name also exists on the hub is known offline only from the local hub
cache, so a local path, sample or timm name is noted as a hub id too only when the cache holds that id.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from condcli.errors import InputError, UsageError
from condcli.loading.factory import FactorySpec, check_file, parse_factory
from condcli.loading.samples import sample_names, samples_dir
from condcli.loading.weights_files import PICKLE_SUFFIXES, SAFE_SUFFIXES

NEAR = 0.8  # difflib similarity from which an unknown bare name counts as a typo of a sample or timm name
REPORT_HINT = " (a saved report is read by condcli report and condcli compare)"
# a name ending so is a file the user meant (missing), never a hub id or a timm name
FILE_SUFFIXES = (*SAFE_SUFFIXES, *PICKLE_SUFFIXES, ".gguf", ".json", ".py", ".toml", ".yaml", ".yml", ".txt")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed MODEL argument."""

    text: str  # what the user typed
    kind: Literal["timm", "hf", "local", "factory"]
    target: str  # timm name, hub id, folder path, or the factory as typed
    weights_file: Path | None = None  # MODEL was a weights file inside a model folder
    factory: FactorySpec | None = None  # MODEL was file.py:factory or package.module:factory
    gguf: Path | None = None  # MODEL was a GGUF file (target: its folder)
    note: str | None = None  # the name could also mean something else: which was taken, how to get the other
    unprefixed_hub: bool = False  # a hub id typed without hf: (taken as one after the other kinds)


def parse_spec(text: str) -> ModelSpec:
    """Decide what kind of MODEL ``text`` names (without loading anything); see the module."""
    raw = text.strip()
    if not raw:
        raise UsageError("MODEL is empty", "give a timm name, a Hugging Face id, a folder or a sample name")
    if raw.startswith("timm:"):
        return ModelSpec(raw, "timm", raw[len("timm:") :])
    if raw.startswith("hf:"):
        return ModelSpec(raw, "hf", raw[len("hf:") :])
    factory = parse_factory(raw)
    if factory is not None:
        check_file(factory)
        return ModelSpec(raw, "factory", raw, factory=factory)
    path = Path(raw).expanduser()
    if _exists(path):
        return replace(_local_spec(raw, path), note=_local_note(raw, path))
    if raw in sample_names():
        return ModelSpec(raw, "local", str(samples_dir() / raw), note=_sample_note(raw))
    if raw.startswith((".", "/", "~")) or raw.lower().endswith(FILE_SUFFIXES) or "\\" in raw:
        raise InputError(f"{raw}: no such file or folder", "check the path")
    if is_timm_name(raw):
        return ModelSpec(raw, "timm", raw, note=_hub_note(raw, "a timm model name", "the timm model"))
    if "/" in raw:
        if not is_hub_id(raw):
            raise InputError(
                f"{raw}: no such file or folder, and not a Hugging Face hub id (org/name)", "check the path"
            )
        return ModelSpec(raw, "hf", raw, unprefixed_hub=True)
    near = near_names(raw)
    if not near and is_hub_id(raw):
        return ModelSpec(raw, "hf", raw, unprefixed_hub=True)
    raise InputError(f"unknown model {raw!r}", suggest(raw, near))


def is_timm_name(name: str) -> bool:
    """``timm.is_model(name)``, without importing timm (seconds: it imports torchvision) where it cannot hold:
    timm registers each architecture under its Python function's name and ignores what follows the first
    ``.`` (a pretrained tag), so a name whose part before the first ``.`` is no identifier (a path, a
    sample's name with ``-``) is none."""
    if not name.split(".", 1)[0].isidentifier():
        return False
    import timm

    return bool(timm.is_model(name))


def in_timm_source(name: str) -> bool:
    """Whether timm's installed source could register ``name`` (its part before the first ``.``): one of
    :func:`timm_source_names`. A necessary condition of :func:`is_timm_name` that imports no timm, used only
    for a note: a name no file holds is no timm model, and a name one holds is asked of timm itself."""
    return name.split(".", 1)[0] in timm_source_names()


@functools.cache
def timm_source_names() -> frozenset[str]:
    """Every name timm's installed source registers, read as text without importing timm (seconds: it
    imports torchvision): each function decorated ``@register_model`` (registered under its own name) and
    each key of a ``register_model_deprecations(…)`` map (a deprecated name). tests/test_load_shortcuts.py
    checks that it holds every name timm registers. timm not installed: none."""
    found = importlib.util.find_spec("timm")
    if found is None or not found.submodule_search_locations:
        return frozenset()
    names: set[str] = set()
    for folder in found.submodule_search_locations:
        for path in Path(folder).rglob("*.py"):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "register_model" not in text:
                continue
            names.update(REGISTERED.findall(text))
            start = text.find(DEPRECATIONS)
            while start >= 0:
                end = text.find("})", start)
                names.update(DEPRECATED.findall(text, start, len(text) if end < 0 else end))
                start = text.find(DEPRECATIONS, start + 1)
    return frozenset(names)


# ``@register_model`` (other decorators may follow it), then the function it registers under its name
REGISTERED = re.compile(r"^[ \t]*@register_model[ \t]*\n(?:[ \t]*@[^\n]*\n)*[ \t]*def[ \t]+(\w+)", re.M)
DEPRECATIONS = "register_model_deprecations("
DEPRECATED = re.compile(r"['\"](\w+)['\"]\s*:")  # a key of the deprecation map: the deprecated name


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte: no such path
        return False


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is a syntactically valid Hugging Face repository id (``name`` or ``org/name``)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id  # type: ignore[attr-defined]

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def near_names(name: str) -> list[str]:
    """The sample and timm names ``name`` is a near miss of (similarity ≥ :data:`NEAR`, ``-`` and ``_``
    alike, ignoring case), closest first."""
    import timm

    pool = [*sample_names(), *timm.list_models()]
    by_key = {p.lower().replace("-", "_"): p for p in reversed(pool)}
    key = name.lower().replace("-", "_")
    found = difflib.get_close_matches(key, list(by_key), n=4, cutoff=NEAR)
    return [by_key[k] for k in found]


def suggest(name: str, near: list[str] | None = None) -> str:
    """The hint for an unknown ``name``: the closest sample and timm names, else the kinds MODEL can be."""
    import timm

    close = near if near is not None else near_names(name)
    if not close:
        pool = [*timm.list_models(), *sample_names()]
        close = difflib.get_close_matches(name, pool, n=4, cutoff=0.6)
    if not close:
        close = sorted(timm.list_models(f"*{name.split('_')[0]}*"))[:4]
    hub = f"; hf:{name} for a Hugging Face hub id" if is_hub_id(name) else ""
    if close:
        return "did you mean " + ", ".join(close) + f"? ('condcli models' lists the samples{hub})"
    return "give a timm name (timm.list_models()), a Hugging Face id (hf:org/name), a folder or a sample name"


def in_hub_cache(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id``'s config.json (the offline sign that the id
    exists on the hub)."""
    if not is_hub_id(repo_id):
        return False
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except (OSError, ValueError):
        return False
    return isinstance(found, str)


def _note(first: str, also: str, used: str, other: str) -> str:
    """One line: ``first`` and also ``also``; which ``used``; how to get the ``other``."""
    return f"{first} and also {also}: {used} is used ({other})"


HUB_CACHED = "a Hugging Face hub id in the local cache"


def _hub_note(raw: str, what: str, taken: str) -> str | None:
    if not in_hub_cache(raw):
        return None
    return _note(f"{raw!r} is {what}", HUB_CACHED, taken, f"hf:{raw} for the hub's")


def _local_note(raw: str, path: Path) -> str | None:
    """The other meaning of a name that is an existing path: a sample's name, a timm name, a cached hub id."""
    here = f"{raw!r} is the local {'folder' if path.is_dir() else 'file'} {path}"
    if raw in sample_names():
        sample = f"give {samples_dir() / raw} for the sample"
        return _note(here, "a shipped sample's name", "the local one", sample)
    if in_timm_source(raw) and is_timm_name(raw):  # timm's import costs seconds: only where it can say yes
        return _note(here, "a timm model name", "the local one", f"timm:{raw} for timm's")
    if in_hub_cache(raw):
        return _note(here, HUB_CACHED, "the local one", f"hf:{raw} for the hub's")
    return None


def _sample_note(raw: str) -> str | None:
    if is_timm_name(raw):
        first = f"{raw!r} is a shipped sample"
        return _note(first, "a timm model name", "the sample", f"timm:{raw} for timm's")
    return _hub_note(raw, "a shipped sample", "the sample")


def _local_spec(raw: str, path: Path) -> ModelSpec:
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(
                f"{raw} has no config.json, so it is not a Hugging Face or timm model folder",
                "give a folder saved with save_pretrained / timm save_for_hf,"
                " or a weights file with `checkpoint`",
            )
        return ModelSpec(raw, "local", str(path))
    if path.suffix.lower() == ".gguf":
        return ModelSpec(raw, "local", str(path.parent), gguf=path)
    if path.suffix.lower() not in SAFE_SUFFIXES + PICKLE_SUFFIXES:
        raise InputError(
            f"{raw} is not a model folder, a weights file (.safetensors, .pt, .bin), a GGUF file"
            " or a factory (file.py:name)",
            "give a folder holding config.json, a timm name, a Hugging Face id or a sample name"
            + (REPORT_HINT if path.suffix.lower() == ".json" else ""),
        )
    if (path.parent / "config.json").is_file():
        return ModelSpec(raw, "local", str(path.parent), weights_file=path)
    raise InputError(
        f"{raw} is a weights file without a config.json beside it, so its architecture is unknown",
        "give the architecture as MODEL and the file as `checkpoint`,"
        f" e.g. vit_base_patch16_224 `checkpoint={raw}`",
    )
