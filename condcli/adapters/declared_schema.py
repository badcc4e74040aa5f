"""The ``--adapter FILE.toml`` format: read by condcli.parsing, every key checked, as a typed Declaration.

A declared adapter is a family written as data (:mod:`condcli.adapters.declared` builds it)::

    input = "images"                  # images | text (default images)

    [embedding]
    module = "embed"                  # module path in the model
    x = "output"                      # X is its output or its "input"
    position_encoded = true           # whether X carries the position encoding (default true)
    layout = "tokens"                 # tokens | nhwc | nchw (default tokens)

    [blocks]
    path = "layers"                   # a ModuleList/Sequential, a pattern "blocks.*", or a list of paths

    [attention]                       # paths below are relative to each block
    module = "attn"
    heads = 4
    kv_heads = 4                      # default: heads
    causal = false                    # default false

    [attention.projections]
    q = "q"                           # separate projections: q, k, v
    k = "k"
    v = "v"                           # or "identity" where the model has no W_V
    # fused = "qkv"                   # or one fused projection, its parts in `order`, laid out as `layout`
    # order = "qkv"                   # a permutation of q, k and v (or of q and k, with v given apart)
    # layout = "stacked"              # stacked | per_head | per_group

    [attention.probs]
    source = "module"                 # module (its output is P) | tap | returned | none
    module = "softmax"                # with source = "module": relative to the attention
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from condcli.adapters.base import FusedLayout
from condcli.errors import InputError
from condcli.layout import Layout

ProbsSource = Literal["module", "tap", "returned", "none"]

KEYS: dict[str, tuple[str, ...]] = {
    "": ("input", "embedding", "blocks", "attention"),
    "embedding": ("module", "x", "position_encoded", "layout"),
    "blocks": ("path",),
    "attention": ("module", "heads", "kv_heads", "causal", "projections", "probs"),
    "attention.projections": ("q", "k", "v", "fused", "order", "layout"),
    "attention.probs": ("source", "module"),
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "": ("embedding", "blocks", "attention"),
    "embedding": ("module", "x"),
    "blocks": ("path",),
    "attention": ("module", "heads", "projections", "probs"),
    "attention.probs": ("source",),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "input": ("images", "text"),
    "embedding.x": ("output", "input"),
    "embedding.layout": ("tokens", "nhwc", "nchw"),
    "attention.projections.layout": ("stacked", "per_head", "per_group"),
    "attention.probs.source": ("module", "tap", "returned", "none"),
}


@dataclass(frozen=True)
class Projections:
    """Separate q, k, v module paths, or one fused module with its parts' order and layout."""

    q: str | None = None
    k: str | None = None
    v: str | None = None  # "identity": the model has no W_V
    fused: str | None = None
    order: str = "qkv"
    layout: FusedLayout = "stacked"


@dataclass(frozen=True)
class Declaration:
    """A checked adapter file."""

    file: Path
    input_kind: Literal["images", "text"]
    embedding: str
    x_at_input: bool
    position_encoded: bool
    layout: Layout
    blocks: str | tuple[str, ...]
    attention: str
    heads: int
    kv_heads: int
    causal: bool
    projections: Projections
    probs: ProbsSource
    probs_module: str | None


class Reader:
    """Reads one parsed file; every complaint names the file and the key."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def error(self, key: str, what: str, hint: str | None = None) -> InputError:
        return InputError(f"{self.file}: {key} {what}", hint or f"see the adapter format ({_FORMAT})")

    def table(self, data: Any, where: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.error(where, f"must be a table ([{where}]), not {type(data).__name__}")
        for key in data:
            if key not in KEYS[where]:
                full = f"{where}.{key}" if where else key
                close = difflib.get_close_matches(key, KEYS[where], n=1)
                hint = f"did you mean {close[0]!r}?" if close else None
                raise self.error(full, f"is not a known key (known here: {', '.join(KEYS[where])})", hint)
        for key in REQUIRED.get(where, ()):
            if key not in data:
                raise self.error(f"{where}.{key}" if where else key, "is missing")
        return data

    def string(self, data: dict[str, Any], where: str, key: str, default: str | None = None) -> str:
        full = f"{where}.{key}" if where else key
        value = data.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(full, f"must be a non-empty string, not {value!r}")
        if full in CHOICES and value not in CHOICES[full]:
            raise self.error(full, f"= {value!r} is not one of {', '.join(CHOICES[full])}")
        return value.strip()

    def flag(self, data: dict[str, Any], where: str, key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.error(f"{where}.{key}", f"must be true or false, not {value!r}")
        return value

    def positive(self, data: dict[str, Any], where: str, key: str, default: int | None = None) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self.error(f"{where}.{key}", f"must be a positive integer, not {value!r}")
        return value


_FORMAT = "the docstring of condcli.adapters.declared_schema, or docs/guides/your-own-model.md"


def read_declaration(file: Path) -> Declaration:
    """Parse and check ``file`` (exit-2 errors naming the file and the key)."""
    from condcli.parsing import read_toml

    try:
        found = file.is_file()
    except (OSError, ValueError):  # a name the file system cannot hold
        found = False
    if not found:
        raise InputError(f"`adapter={file}`: no such file", "give the path of an adapter .toml file")
    raw = read_toml(file, f"`adapter={file}`", f"fix the file (the format: {_FORMAT})")
    r = Reader(file)
    top = r.table(raw, "")
    emb = r.table(top["embedding"], "embedding")
    blocks = r.table(top["blocks"], "blocks")
    attn = r.table(top["attention"], "attention")
    projections = _projections(r, r.table(attn["projections"], "attention.projections"))
    probs = r.table(attn["probs"], "attention.probs")
    source = cast(ProbsSource, r.string(probs, "attention.probs", "source"))
    if (source == "module") != ("module" in probs):
        raise r.error(
            "attention.probs.module",
            "is needed with source = 'module'"
            if source == "module"
            else f"is not used with source = {source!r}",
        )
    heads = r.positive(attn, "attention", "heads")
    kv_heads = r.positive(attn, "attention", "kv_heads", heads)
    if heads % kv_heads:
        raise r.error("attention.kv_heads", f"= {kv_heads} does not divide attention.heads = {heads}")
    return Declaration(
        file=file,
        input_kind=cast(Literal["images", "text"], r.string(top, "", "input", "images")),
        embedding=r.string(emb, "embedding", "module"),
        x_at_input=r.string(emb, "embedding", "x") == "input",
        position_encoded=r.flag(emb, "embedding", "position_encoded", True),
        layout=cast(Layout, r.string(emb, "embedding", "layout", "tokens")),
        blocks=_blocks(r, blocks["path"]),
        attention=r.string(attn, "attention", "module"),
        heads=heads,
        kv_heads=kv_heads,
        causal=r.flag(attn, "attention", "causal", False),
        projections=projections,
        probs=source,
        probs_module=r.string(probs, "attention.probs", "module") if source == "module" else None,
    )


def _blocks(r: Reader, value: Any) -> str | tuple[str, ...]:
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(v.strip() for v in value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise r.error("blocks.path", f"must be a module path, a pattern or a list of paths, not {value!r}")


def _projections(r: Reader, data: dict[str, Any]) -> Projections:
    where = "attention.projections"
    if "fused" not in data:
        for key in ("order", "layout"):
            if key in data:
                raise r.error(f"{where}.{key}", "is used only with a fused projection (fused = ...)")
        for key in ("q", "k", "v"):
            if key not in data:
                raise r.error(f"{where}.{key}", "is missing (or give one fused projection: fused = ...)")
        q, k, v = (r.string(data, where, key) for key in ("q", "k", "v"))
        return Projections(q=q, k=k, v=v)
    for key in ("q", "k"):
        if key in data:
            raise r.error(f"{where}.{key}", "cannot be given beside fused (Q and K come from it)")
    order = r.string(data, where, "order", "qkv")
    if sorted(order) not in (sorted("qkv"), sorted("qk")):
        raise r.error(f"{where}.order", f"= {order!r} is not an order of q, k and v (or of q and k)")
    fused_v = r.string(data, where, "v") if "v" in data else None
    if ("v" in order) == (fused_v is not None):
        raise r.error(
            f"{where}.v",
            "cannot be given: v is part of the fused order"
            if fused_v is not None
            else "is missing: order has no v",
            "give v = a module path or 'identity', or add v to order",
        )
    layout = cast(FusedLayout, r.string(data, where, "layout", "stacked"))
    if layout == "per_group" and order != "qkv":
        raise r.error(f"{where}.order", f"= {order!r}: the per_group layout holds queries, then k and v")
    return Projections(v=fused_v, fused=r.string(data, where, "fused"), order=order, layout=layout)
