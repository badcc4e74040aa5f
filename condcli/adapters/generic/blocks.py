"""Every attention layer of a vision model, in the order the model calls them (docs/math.md#x, #layers).

- An attention is a module whose Q/K/V projections :func:`condcli.adapters.generic.attn.read` reads and
  that computes a softmax (:func:`condcli.adapters.generic.mixers.is_attention`), the outermost such (a
  nested one is not counted twice). One under an attention-pooling head is not a
  transformer block and is left out.
- Its block is the lowest element of a ModuleList/Sequential that holds it and no other attention (a ViT,
  Swin or PVT block), else its highest ancestor that holds no other attention: the attention's own
  residual unit where one block holds several (MaxViT's attn_block and attn_grid, TNT's attn_in and
  attn_out). Layer names are the blocks' module paths; a block called k times gives k layers ('#callK').
- X_l is the stream entering the block: the input of the pre-norm whose output the attention reads, where
  there is one in the block (so a position encoding inside the block, CoaT's cpe, comes before it), else
  the block's input. X is the first layer's X_l, taken where a hook can condition it for the whole block.

One trace forward at build time, on two identical random images, finds the call order, which norm feeds
each attention, the layout of every tensor read (see :mod:`condcli.adapters.generic.layouts`), and
whether a folded batch axis holds the images outermost or innermost (equal halves, or equal neighbours).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from condcli.adapters.generic.attn import Reading, read
from condcli.adapters.generic.layouts import Grouping, grouping_of, layout_of
from condcli.adapters.generic.mixers import is_attention, skipped
from condcli.adapters.generic.trace import Call, Trace, run_trace
from condcli.layout import Layout

Tensor = torch.Tensor
POOLING_HEADS = ("head", "attn_pool", "pooler", "pool_head")  # attention pooling: not a transformer block
TRACE_BATCH = 2


@dataclass(frozen=True)
class Found:
    """One attention layer as the generic path found it."""

    name: str  # module path of its block (with '#callK' for a block called several times)
    block: nn.Module
    attn: nn.Module
    reading: Reading
    stream: nn.Module  # the module whose first input is X_l: the pre-norm, or the block
    stream_layout: Layout | None  # None: decided from each tensor's shape
    attn_layout: Layout | None
    grouping: Grouping  # how the attention input's leading axis holds the images
    stream_grouping: Grouping
    call: int = 0
    groups: tuple[int, int] | None = None  # (G, n): the attention reads G groups of n tokens per image


@dataclass(frozen=True)
class Embedding:
    """Where X is taken: ``module``'s first input (``at_input``) or its output, in ``layout``."""

    module: nn.Module
    name: str
    at_input: bool
    layout: Layout
    what: str  # in words, for the report
    enters: str  # the module path the tokens enter
    width: int  # their channel count
    note: str | None = None  # why X is not the first attention's own stream, where it is not


def attentions(model: nn.Module) -> dict[str, tuple[nn.Module, Reading]]:
    """Every attention module the generic path reads, by path, outermost only, pooling heads left out."""
    found: dict[str, tuple[nn.Module, Reading]] = {}
    for name, mod in model.named_modules():
        if any(name == a or name.startswith(f"{a}.") for a in found):
            continue
        parts = name.split(".")
        if any(p in POOLING_HEADS for p in parts):
            continue
        reading = read(mod) if name else None
        if reading is not None and is_attention(mod, reading):  # a state-space mixer is none
            found[name] = (mod, reading)
    return found


def blocks(model: nn.Module, attns: dict[str, tuple[nn.Module, Reading]]) -> dict[str, str]:
    """attention path → its block's path: the lowest element of a ModuleList/Sequential that holds it and
    no other attention, else its highest ancestor (below the model) that holds no other attention."""
    modules = dict(model.named_modules())
    out: dict[str, str] = {}
    for name in attns:
        alone = [name]  # the attention and its ancestors that hold no other attention, lowest first
        parts = name.split(".")
        for depth in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:depth])
            if [a for a in attns if a == prefix or a.startswith(f"{prefix}.")] != [name]:
                break
            alone.append(prefix)
        listed = [p for p in alone if isinstance(modules.get(_parent(p)), nn.ModuleList | nn.Sequential)]
        out[name] = listed[0] if listed else alone[-1]
    return out


@dataclass(frozen=True)
class Discovery:
    """The attention layers in call order, where X is, and what the discovery could not settle."""

    layers: tuple[Found, ...]
    embedding: Embedding | None  # None: no trace; X is the first block's input
    notes: tuple[str, ...]
    trace: Trace | None


def _inside(name: str, scope: str) -> bool:
    return scope == "" or name == scope or name.startswith(f"{scope}.")


def _parent(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def discover(model: nn.Module, run: Callable[[Tensor], Any], examples: list[Tensor]) -> Discovery | None:
    """The attention layers of ``model`` (None: it has none the generic path reads). ``run`` calls the model
    on pixels; ``examples`` are inputs of the sizes to try, each two identical images."""
    for again in (False, True):
        attns = attentions(model)
        if not attns:
            return None
        block_of = blocks(model, attns)
        modules = dict(model.named_modules())
        keep = {id(modules[p]) for a in attns for p in _ancestors(a)}
        attn_ids = {id(m) for m, _ in attns.values()}
        trace, failure = None, ""
        for pixels in examples:
            try:
                trace = run_trace(model, lambda p=pixels: run(p), keep, attn_ids)  # type: ignore[misc]
                break
            except Exception as e:
                failure = f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        if trace is None:
            return _static(modules, attns, block_of, failure)
        held = {id(m) for m in model.modules()}
        if again or all(id(m) in held for m, _ in attns.values()):
            break
        # the trial forward re-created attention modules (BigBird's switch of attention type): read the
        # model again as it now is, and trace it once more
    assert trace is not None  # a failed trace returned above
    others = skipped(model, list(attns))
    if others is not None:
        found = _discovered(modules, attns, block_of, trace)
        return replace(found, notes=(*found.notes, others))
    return _discovered(modules, attns, block_of, trace)


def _discovered(
    modules: dict[str, nn.Module],
    attns: dict[str, tuple[nn.Module, Reading]],
    block_of: dict[str, str],
    trace: Trace,
) -> Discovery:
    """The discovery from a trace: in call order, or in registration order where no attention ran."""
    if not any(trace.of(m) for m, _ in attns.values()):
        return _static(
            modules, attns, block_of, "no attention module it found ran (re-created at every forward?)"
        )
    return _traced(modules, attns, block_of, trace)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _static(
    modules: dict[str, nn.Module],
    attns: dict[str, tuple[nn.Module, Reading]],
    block_of: dict[str, str],
    why: str,
) -> Discovery:
    """Registration order, layouts read from each tensor's shape, windows taken as images outermost."""
    layers = tuple(
        Found(block_of[a], modules[block_of[a]], m, r, modules[block_of[a]], None, None, "outer", "outer")
        for a, (m, r) in attns.items()
    )
    note = (
        "the trial forward failed on every input size tried"
        + (f" ({why})" if why else "")
        + ": layers are in registration order and X is the first block's input, as a (B, N, d) tensor"
    )
    return Discovery(layers, None, (note,), None)


def _traced(
    modules: dict[str, nn.Module],
    attns: dict[str, tuple[nn.Module, Reading]],
    block_of: dict[str, str],
    trace: Trace,
) -> Discovery:
    notes: list[str] = []
    calls = sorted((c for a, (m, _) in attns.items() for c in trace.of(m)), key=lambda c: c.order)
    silent = [a for a, (m, _) in attns.items() if not trace.of(m)]
    if silent:
        notes.append(f"attention module(s) that never ran are not analysed: {', '.join(silent[:4])}")
    registered = [a for a in attns if a not in silent]
    if list(dict.fromkeys(c.name for c in calls)) != registered:
        notes.append("layers are in the order the model calls them, not the order it registers them")
    layers, streams = [], []
    for c in calls:
        attn, reading = attns[c.name]
        k = [x.order for x in trace.of(attn)].index(c.order)
        bname = block_of[c.name]
        block = modules[bname]
        bcalls = trace.of(block)
        binp = bcalls[k].inp if len(bcalls) > k else None
        norm = _pre_norm(c, bname, c.name)
        if norm is not None and len(trace.of(norm.module)) != len(trace.of(attn)):
            norm = None  # a norm shared with other calls: its k-th call would not be this layer's
        stream, s = (block, binp) if norm is None or norm.inp is binp else (norm.module, norm.inp)
        if s is None or (stream is block and len(bcalls) != len(trace.of(attn))):
            stream, s = attn, c.inp  # nothing else runs once per call of this attention: X_l is A_l
        width = reading.width
        a_lay = layout_of(c.inp, width) if c.inp is not None else None
        s_lay = layout_of(s, width) if s is not None else None
        a_grp = grouping_of(c.inp, TRACE_BATCH) if c.inp is not None else None
        s_grp = grouping_of(s, TRACE_BATCH) if s is not None else None
        if a_grp is None or s_grp is None:
            notes.append(f"{bname}: could not tell how its batch axis holds the images; taken as outermost")
        n_calls = len(trace.of(attn))
        name = bname if n_calls == 1 else f"{bname}#call{k}"
        groups = _groups(c.inp, a_lay)
        grp, s_grp = a_grp or "outer", s_grp or "outer"
        layers.append(Found(name, block, attn, reading, stream, s_lay, a_lay, grp, s_grp, k, groups))
        streams.append(s)
    embedding = _embedding(modules, trace, layers, streams[0], calls[0]) or _block_input(trace, layers[0])
    if embedding is None:
        notes.append("X: no module hands the first block its tokens as (B, ·) images; X is its input")
    return Discovery(tuple(layers), embedding, tuple(notes), trace)


def _block_input(trace: Trace, first: Found) -> Embedding | None:
    """X as the first block's own input, where the stream its attention reads is made inside the block by
    no module (a reshape: EdgeNeXt's NCHW block input flattened to tokens)."""
    calls = trace.of(first.block)
    x = calls[0].inp if calls else None
    lay = layout_of(x, first.reading.width) if x is not None else None
    if x is None or lay is None or int(x.shape[0]) != TRACE_BATCH:
        return None
    name = first.name.split("#")[0]
    note = f"X is the input of {name}: the tokens its attention reads are made from it inside the block"
    return Embedding(first.block, name, True, lay, f"input of {name}", name, first.reading.width, note)


def _groups(x: Tensor | None, layout: Layout | None) -> tuple[int, int] | None:
    """(G, n) where the attention's input folds G groups of n tokens per image into its batch axis."""
    if x is None or layout is None or int(x.shape[0]) == TRACE_BATCH or int(x.shape[0]) % TRACE_BATCH:
        return None
    n = (
        int(x.shape[1])
        if layout == "tokens"
        else int(x[0, 0].numel() if layout == "nchw" else x[0, ..., 0].numel())
    )
    return int(x.shape[0]) // TRACE_BATCH, n


def _pre_norm(attn_call: Call, block: str, attn: str) -> Call | None:
    """The norm call whose output the attention reads, inside its block (or, where the attention is its own
    block, inside the module that holds it)."""
    scope = _parent(attn) if block == attn else block
    norm = attn_call.fed_by
    return norm if norm is not None and _inside(norm.name, scope) else None


def _embedding(
    modules: dict[str, nn.Module],
    trace: Trace,
    layers: list[Found],
    s: Tensor | None,
    attn_call: Call,
) -> Embedding | None:
    """Where a hook reads X and can condition it for the whole first block (None: nowhere found)."""
    first = layers[0]
    if s is None:
        return None
    width = first.reading.width
    block_name = first.name.split("#")[0]
    start = _parent(block_name) if first.block is first.attn else block_name
    ancestors = list(reversed(_ancestors(start) if start else []))  # lowest first
    before = trace.calls[: attn_call.order]
    if int(s.shape[0]) == TRACE_BATCH:
        for anc in ancestors:
            calls = trace.of(modules[anc])
            if calls and calls[0].inp is s:
                lay = layout_of(s, width) or "tokens"
                return Embedding(modules[anc], anc, True, lay, f"input of {anc}", anc, width)
        made = next((c for c in before if c.out is s), None)
        if made is not None:
            lay = layout_of(s, width) or "tokens"
            return Embedding(made.module, made.name, False, lay, f"output of {made.name}", block_name, width)
        return None
    # the first block reads folded groups (B·G, n, c): the last module before it that hands over the same
    # numbers per image, (B, ·), in another order
    values = s.detach().flatten().sort().values
    for c in reversed(before):
        t = c.out
        found = layout_of(t, width) if t is not None else None
        if t is None or found is None or int(t.shape[0]) != TRACE_BATCH or t.numel() != s.numel():
            continue
        if torch.equal(t.detach().flatten().sort().values, values):
            note = (
                f"{block_name} reads these tokens unfolded into {s.shape[0] // TRACE_BATCH} groups of "
                f"{s.shape[1]} per image: the same rows in another order (κ(X) and its spectrum do not "
                "depend on the order; λ·I_k is added in this one)"
            )
            return Embedding(c.module, c.name, False, found, f"output of {c.name}", block_name, width, note)
    return _beside(modules, trace, layers, ancestors, before)


def _beside(
    modules: dict[str, nn.Module], trace: Trace, layers: list[Found], ancestors: list[str], before: list[Call]
) -> Embedding | None:
    """Where the first attention reads a folded stream that no module hands over per image (TNT's pixels
    within patches): the image-level tokens that enter the same block beside it (TNT's patch tokens), as
    the module that made them outputs them."""
    widths = {f.reading.width for f in layers}
    for anc in ancestors:
        calls = trace.of(modules[anc])
        if not calls:
            continue
        for t in calls[0].others:
            w = next((w for w in widths if layout_of(t, w) is not None), None)
            lay = layout_of(t, w) if w is not None else None
            made = next((c for c in before if c.out is t), None)
            if w is None or lay is None or made is None or int(t.shape[0]) != TRACE_BATCH:
                continue
            note = (
                f"the first attention, {layers[0].name}, reads a stream folded into groups of the images "
                f"(its X_l has them side by side); X is the image-level stream that enters {anc} beside it"
            )
            return Embedding(made.module, made.name, False, lay, f"output of {made.name}", anc, w, note)
    return None
