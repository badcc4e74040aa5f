"""A declared adapter (``--adapter FILE.toml``): a family written as data.

:func:`build` resolves a checked :class:`~condcli.adapters.declared_schema.Declaration` against the model
and builds the same objects a family adapter builds (:class:`Adapter`, :class:`LayerSpec`, :class:`Probe`,
:class:`HeadWeights`), with the generic path's own readers: X_l the block's first input, A_l the attention's
first input, P an ``nn.Softmax``-like module's output, the softmax tap or the returned weights, and W split
by :func:`fused_qkv` / :func:`head_split`. A path the model does not have is an error naming the key and
the closest paths it has.
"""

from __future__ import annotations

import difflib
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import (
    Adapter,
    EmbeddingPoint,
    HeadWeights,
    LayerSpec,
    Probe,
    first_input,
    fused_flags,
    fused_qkv,
    head_split,
)
from condcli.adapters.declared_schema import Declaration, Projections, Reader, read_declaration
from condcli.adapters.generic.build import _returned_probs
from condcli.adapters.generic.heads import LAYOUT_WORDS, beside_bias, weights_on_request
from condcli.adapters.generic.layouts import attention_input, module_probs
from condcli.adapters.generic.maps import linear_map
from condcli.adapters.softmax_tap import softmax_probe

Tensor = torch.Tensor


def build(model: nn.Module, file: Path) -> Adapter:
    """The adapter ``file`` declares for ``model`` (one-line exit-2 errors naming the key)."""
    d = read_declaration(file)
    r = Reader(file)
    embedding = _module(r, model, "", d.embedding, "embedding.module")
    blocks = _blocks(r, model, d.blocks)
    layers: list[LayerSpec] = []
    for i, (name, block) in enumerate(blocks):
        attn = _module(r, block, name, d.attention, "attention.module")
        weights, width = _weights(r, d, block, name, attn)
        try:
            weights()  # checked once here: shapes that do not fit the head counts are the file's error
        except ValueError as e:
            raise r.error("attention.heads", f"= {d.heads} does not fit {name}.{d.attention}: {e}") from None
        layers.append(
            LayerSpec(
                index=i,
                name=name,
                attention=f"softmax attention (declared in {file.name})",
                heads=d.heads,
                x_in=Probe(block, first_input, after=False),
                attn_in=Probe(attn, partial(attention_input, width, None, "outer"), after=False),
                probs=_probs(r, d, block, name, attn),
                weights=weights,
                causal=d.causal,
                no_probs=f"P is not observed: {file} declares attention.probs.source = 'none'",
                qkv_source="declared",
            )
        )
    where = "input" if d.x_at_input else "output"
    first = blocks[0][1]
    hf = hasattr(model, "config")
    forward = None if hf else _plain_forward(model, d.input_kind)
    if hf and d.probs == "returned" and weights_on_request(_module(r, first, blocks[0][0], d.attention, "")):
        forward = partial(_with_attentions, model)
    return Adapter(
        family="declared",
        model=model,
        embedding=EmbeddingPoint(
            embedding,
            d.embedding,
            f"{where} of {d.embedding} (declared in {file.name})",
            layout=d.layout,
            after_position_encoding=d.position_encoded,
            at_input=d.x_at_input,
        ),
        layers=tuple(layers),
        input_kind=d.input_kind,
        notes=(f"adapter declared in {file}", f"{blocks[0][0]}: {_describe(d)}"),
        forward=forward,
        fused_flags=fused_flags(model),
    )


def _plain_forward(model: nn.Module, kind: str) -> Any:
    key = "pixel_values" if kind == "images" else "input_ids"
    return lambda inputs: model(inputs[key])


def _with_attentions(model: nn.Module, inputs: dict[str, Tensor]) -> Any:
    return model(**inputs, output_attentions=True)


def _describe(d: Declaration) -> str:
    p = d.projections
    heads = f"{d.heads} heads" + (f", {d.kv_heads} key/value heads" if d.kv_heads != d.heads else "")
    if p.fused is None:
        qkv = f"Q, K from {p.q}, {p.k}"
    else:
        parts = [c.upper() for c in p.order]
        how = {
            "stacked": f"[{' | '.join(parts)}] stacked",
            "per_head": f"each head's {', '.join(p.order)} side by side",
            "per_group": LAYOUT_WORDS["per_group"],
        }[p.layout]
        qkv = f"{', '.join(parts)} from the fused {p.fused} ({how})"
    if p.v == "identity":
        qkv += "; V = A_l (no value projection: W_V is the identity)"
    elif "v" not in p.order or p.fused is None:
        qkv += f"; V from {p.v}"
    return f"{heads}; {qkv}; P: {PROBS_WORDS[d.probs].format(d.probs_module)}"


PROBS_WORDS = {
    "module": "the output of {}",
    "tap": "the softmax over the keys observed inside the attention's call",
    "returned": "the weights the attention returns",
    "none": "not observed",
}


def _module(r: Reader, root: nn.Module, root_name: str, path: str, key: str) -> nn.Module:
    """``root``'s submodule at ``path``; else an error naming ``key`` and the closest paths."""
    try:
        return root.get_submodule(path)
    except AttributeError:
        pass
    names = [n for n, _ in root.named_modules() if n]
    close = difflib.get_close_matches(path, names, n=3, cutoff=0.5)
    inside = f"{root_name} ({type(root).__name__})" if root_name else f"the model ({type(root).__name__})"
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else "paths are dotted module names"
    raise r.error(key, f"= {path!r}: {inside} has no module at that path", hint)


def _blocks(r: Reader, model: nn.Module, blocks: str | tuple[str, ...]) -> list[tuple[str, nn.Module]]:
    """The blocks in order: each path of a list, the modules a pattern matches, or a ModuleList's items."""
    if isinstance(blocks, tuple):
        return [(p, _module(r, model, "", p, "blocks.path")) for p in blocks]
    if any(c in blocks for c in "*?["):
        parts = blocks.split(".")
        found = [
            (n, m)
            for n, m in model.named_modules()
            if n and len(n.split(".")) == len(parts) and all(map(fnmatchcase, n.split("."), parts))
        ]
        if not found:
            raise r.error("blocks.path", f"= {blocks!r} matches no module of the model")
        return found
    stack = _module(r, model, "", blocks, "blocks.path")
    if not isinstance(stack, nn.ModuleList | nn.Sequential) or len(stack) == 0:
        raise r.error(
            "blocks.path",
            f"= {blocks!r} is a {type(stack).__name__}, not a non-empty ModuleList or Sequential",
            f"give the list, a pattern such as '{blocks}.*', or a list of paths",
        )
    return [(f"{blocks}.{i}", b) for i, b in enumerate(stack)]


def _linear(r: Reader, block: nn.Module, name: str, path: str, key: str) -> tuple[Tensor, Tensor | None]:
    """(weight (out, in), bias) of the projection at ``path`` (nn.Linear, 1×1 Conv2d, Linear + BatchNorm)."""
    module = _module(r, block, name, path, key)
    # linear_map recurses into a ``linear`` attribute (LeViT's LinearNorm): only modules that may be read
    found = (
        linear_map(module) if isinstance(module, nn.Linear | nn.Conv2d) or hasattr(module, "linear") else None
    )
    if found is None:
        got = type(module).__name__
        raise r.error(key, f"= {path!r} in {name} is a {got}, not an nn.Linear (or 1×1 Conv2d)")
    return found


def _weights(r: Reader, d: Declaration, block: nn.Module, name: str, attn: nn.Module) -> tuple[Any, int]:
    """(the lazy per-head weights of one layer, the width of A_l). Paths are relative to the attention."""
    p, key = d.projections, "attention.projections"
    at = f"{name}.{d.attention}"
    if p.fused is not None:
        w, b = _linear(r, attn, at, p.fused, f"{key}.fused")
        if b is None:
            b = beside_bias(attn)
    else:
        assert p.q is not None and p.k is not None
        w, b = _linear(r, attn, at, p.q, f"{key}.q")
        _linear(r, attn, at, p.k, f"{key}.k")
    width = int(w.shape[1])
    if p.v not in (None, "identity"):
        assert p.v is not None
        _linear(r, attn, at, p.v, f"{key}.v")
    return partial(_read, r, d.projections, attn, at, d.heads, d.kv_heads), width


def _read(r: Reader, p: Projections, attn: nn.Module, at: str, heads: int, kv: int) -> HeadWeights:
    """The layer's per-head W_Q, W_K, W_V (float64), read from its modules now."""
    key = "attention.projections"
    wv: Tensor | None = None
    bv: Tensor | None = None
    if p.fused is not None:
        w, b = _linear(r, attn, at, p.fused, f"{key}.fused")
        if b is None:
            b = beside_bias(attn)
        if p.order == "qkv":
            return fused_qkv(w, b, heads, kv, p.layout)
        q, k, v = _rows(p, int(w.shape[0]), heads, kv)
        wq, wk = w[q].T, w[k].T
        bq, bk = (None, None) if b is None else (b[q], b[k])
        if v is not None:
            wv, bv = w[v].T, None if b is None else b[v]
    else:
        assert p.q is not None and p.k is not None
        (wq, bq), (wk, bk) = _linear(r, attn, at, p.q, f"{key}.q"), _linear(r, attn, at, p.k, f"{key}.k")
        wq, wk = wq.T, wk.T
    if p.v == "identity":  # V = A_l: each KV head reads its d / H_kv channels of A_l
        wv = torch.eye(int(wq.shape[0]), dtype=torch.float64, device=wq.device)
    elif wv is None:
        assert p.v is not None
        wv, bv = _linear(r, attn, at, p.v, f"{key}.v")
        wv = wv.T
    widths = (int(wq.shape[1]), int(wk.shape[1]), int(wv.shape[1]))
    if widths[0] % heads or widths[1] % kv or widths[2] % kv or widths[0] // heads != widths[1] // kv:
        raise ValueError(f"Q, K, V widths {widths} do not split into {heads}, {kv}, {kv} heads (Q, K alike)")
    return head_split((wq, wk, wv), (bq, bk, bv), heads, kv)


def _rows(p: Projections, rows: int, heads: int, kv: int) -> tuple[Tensor, Tensor, Tensor | None]:
    """Which rows of the fused projection are Q, K (and V), for parts in ``p.order`` (not the plain qkv)."""
    count = {"q": heads, "k": kv, "v": kv}
    units = sum(count[c] for c in p.order)
    if rows % units:
        raise ValueError(f"a fused projection of {rows} rows cannot hold {p.order} for {heads}/{kv} heads")
    dh = rows // units
    if p.layout == "per_head":
        if kv != heads:
            raise ValueError(f"a per_head fused projection cannot hold {heads} query and {kv} KV heads")
        grid = torch.arange(rows).view(heads, len(p.order), dh)
        part = {c: grid[:, j].flatten() for j, c in enumerate(p.order)}
    else:
        start, part = 0, {}
        for c in p.order:
            part[c] = torch.arange(start, start + count[c] * dh)
            start += count[c] * dh
    return part["q"], part["k"], part.get("v")


def _probs(r: Reader, d: Declaration, block: nn.Module, name: str, attn: nn.Module) -> Probe | None:
    """Where this layer's P is observed, as the file declares it."""
    if d.probs == "module":
        assert d.probs_module is not None
        softmax = _module(r, attn, f"{name}.{d.attention}", d.probs_module, "attention.probs.module")
        return Probe(softmax, partial(module_probs, d.heads, "outer"), after=True)
    if d.probs == "returned":
        return Probe(attn, _returned_probs, after=True)
    if d.probs == "tap":
        probe, why = softmax_probe(attn, d.heads)
        if probe is None:
            raise r.error("attention.probs.source", f"= 'tap', but {why}")
        return probe
    return None
