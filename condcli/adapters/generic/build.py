"""Fallback for other models: find a stack of blocks with Q/K/V projections and say what is missing.

X is the first block's input: after the learned absolute position embedding when the model has one outside
the blocks (by its name), else carrying none, with where positions enter instead (rotary, ALiBi, a relative
bias) where the model says so. P is an ``nn.Softmax`` module's output or, for HF models, the weights the
attention returns under eager attention. A block shared by several layers (ALBERT) gives one layer per call.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import (
    Adapter,
    EmbeddingPoint,
    LayerSpec,
    Probe,
    first_input,
    fused_flags,
    group_tokens,
)
from condcli.adapters.generic.attn import Reading, read
from condcli.adapters.generic.diagnose import refusal
from condcli.adapters.generic.gated import WORDS as GATED_WORDS
from condcli.adapters.generic.gated import gated, gated_mixing, gated_probe
from condcli.adapters.generic.heads import (
    FUSED,
    describe,
    local_window,
    rotary,
    rotation,
)
from condcli.adapters.generic.layouts import Grouping, grouped, module_probs, tapped
from condcli.adapters.generic.mixers import attention_of, mixer_of, no_attention
from condcli.adapters.generic.probs import Rows, hf_forward, returned_probs, returns_weights, sink, stochastic
from condcli.adapters.generic.vision import Entry
from condcli.adapters.generic.vision import plan as vision_plan
from condcli.adapters.softmax_tap import computes_softmax, softmax_probe
from condcli.errors import InputError
from condcli.reports.refusal import Refused


def _blocks(model: nn.Module) -> tuple[str, list[tuple[str, nn.Module]]] | None:
    """The stack of blocks, (its path, [(name, block)]): the ModuleList/Sequential holding the most attention
    blocks (then the longest), each element an attention block or, in a hybrid, a block whose token mixer is
    no attention (a Mamba layer) or of the same class as an attention block of the list. A list of lists
    (Funnel's blocks of layers, never called themselves) is one stack, its lists' blocks in order."""
    best: tuple[tuple[int, int], str, list[tuple[str, nn.Module]]] | None = None
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.ModuleList | nn.Sequential) or len(mod) == 0:
            continue
        items: list[tuple[str, nn.Module]] = [
            (f"{name}.{i}" if name else str(i), b) for i, b in enumerate(mod)
        ]
        lists = [(n, sub) for n, sub in items if isinstance(sub, nn.ModuleList)]
        if len(lists) == len(items):
            items = [(f"{n}.{j}", b) for n, sub in lists for j, b in enumerate(sub)]
        if not items:
            continue
        has = [attention_of(b) is not None for _, b in items]
        kinds = {type(b) for (_, b), h in zip(items, has, strict=True) if h}
        pairs = zip(items, has, strict=True)
        if not kinds or not all(h or type(b) in kinds or mixer_of(b) is not None for (_, b), h in pairs):
            continue
        key = (sum(has), len(items))
        if best is None or key > best[0]:
            best = (key, name, items)
    return None if best is None else (best[1], best[2])


# attention classes that mask causally without saying so in an ``is_causal`` attribute
CAUSAL_ATTENTION = ("BloomAttention",)


def _causal(attn: nn.Module) -> bool:
    """Whether the attention's returned weights are causally masked (HF ``is_causal``, or a known class)."""
    classes = {c.__name__ for c in type(attn).__mro__}
    return bool(getattr(attn, "is_causal", False)) or bool(classes.intersection(CAUSAL_ATTENTION))


# a learned absolute position embedding: a part of the last piece of its module or parameter name
# (docs/math.md#x)
ABSOLUTE = ("position_embedding", "embed_positions", "pos_embed")
ABSOLUTE_EXACT = ("wpe",)
# positions that enter inside attention instead: (part of a module name, how), and configs with ALiBi
INSIDE = (
    ("rotary", "rotary"),
    ("rope", "rotary"),
    ("relative_attention_bias", "relative position bias"),
    ("relative_position", "relative position bias"),
    ("rel_pos", "relative position bias"),
    ("rel_embeddings", "disentangled relative position embeddings"),
    ("cpb", "continuous relative position bias"),  # Swin V2's cpb_mlp
    ("attention_biases", "relative position bias"),  # LeViT, EfficientFormer (a parameter)
    ("crpe", "convolutional relative position encoding"),  # CoaT
)
ALIBI_MODEL_TYPES = ("bloom",)


def _absolute_position(model: nn.Module, blocks: str) -> str | None:
    """The learned absolute position embedding that runs before the blocks at ``blocks``: the module or
    parameter outside them whose name says so (the one nearest the blocks in the module tree)."""
    best: tuple[int, str] | None = None
    for name, _ in [*model.named_modules(), *model.named_parameters()]:
        last = name.rsplit(".", 1)[-1].lower()
        if name == blocks or name.startswith(f"{blocks}.") or "rel" in last:
            continue
        if last in ABSOLUTE_EXACT or any(a in last for a in ABSOLUTE):
            shared = 0
            for a, b in zip(name.split("."), blocks.split("."), strict=False):
                if a != b:
                    break
                shared += 1
            if best is None or shared > best[0]:
                best = (shared, name)
    return None if best is None else best[1]


def _positions_inside(model: nn.Module) -> str | None:
    """How positions enter inside attention (rotary, ALiBi, a relative bias), if the model says so."""
    config = getattr(model, "config", None)
    if getattr(config, "alibi", False) is True or getattr(config, "model_type", None) in ALIBI_MODEL_TYPES:
        return "ALiBi"
    if hasattr(config, "rotary_dim"):  # GPT-J, CodeGen: rotary with no module of its own
        return rotary(config)
    for name, mod in model.named_modules():
        words = (name.rsplit(".", 1)[-1].lower(), type(mod).__name__.lower())
        for part, how in INSIDE:
            if any(part in w for w in words):
                return rotary(config) if how == "rotary" else how
    for name, _ in model.named_parameters():  # a bias kept as a parameter of the attention (LeViT, MViTv2)
        last = name.rsplit(".", 1)[-1].lower()
        for part, how in INSIDE:
            if part in last and how != "rotary":
                return how
    return None


def _shared(model: nn.Module) -> list[tuple[str, nn.Module]] | None:
    """ALBERT's layers in call order, (name, block) each, where its config shares layers; else None.

    ``num_hidden_groups`` groups of ``inner_group_num`` blocks serve ``num_hidden_layers`` layers: group g
    runs for the layers [g·L/G, (g+1)·L/G), its blocks in order each time. Each call of a block is its own
    layer, named '#callK' for its k-th call (docs/math.md#layers, shared layers).
    """
    config = getattr(model, "config", None)
    total, groups = getattr(config, "num_hidden_layers", None), getattr(config, "num_hidden_groups", None)
    inner = getattr(config, "inner_group_num", 1)
    if not (isinstance(total, int) and isinstance(groups, int) and isinstance(inner, int)):
        return None
    if min(total, groups, inner) <= 0 or total % groups:
        return None
    # the innermost listed blocks holding one attention each, in registration order: group after group
    held = [
        (f"{name}.{i}" if name else str(i), child)
        for name, mod in model.named_modules()
        if isinstance(mod, nn.ModuleList | nn.Sequential)
        for i, child in enumerate(mod)
        if sum(attention_of(c) is c for c in child.modules()) == 1
    ]
    ids = {id(b) for _, b in held}
    leaves = [(name, b) for name, b in held if not any(id(m) in ids for m in b.modules() if m is not b)]
    per = total // groups
    if len(leaves) != groups * inner or per * inner == 1:
        return None
    return [
        (name if per == 1 else f"{name}#call{layer % per}", block)
        for layer in range(total)
        for name, block in leaves[(layer // per) * inner : (layer // per + 1) * inner]
    ]


def _tokens(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    x = args[0] if args else next(v for v in kwargs.values() if isinstance(v, torch.Tensor))
    if x.ndim != 3:
        raise InputError(
            f"the generic adapter expected (B, N, d) token tensors, got shape {tuple(x.shape)}",
            "this model's layout is not supported yet; open an issue with the model name",
        )
    if x.shape[0] != batch and x.shape[0] % batch == 0:  # windows (B·G, n, c), batch outermost (HF Swin)
        return group_tokens(x, batch)
    return x.unsqueeze(1)


def _returned_probs(
    args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int, grouping: Grouping = "outer"
) -> torch.Tensor | None:
    """The attention weights an HF attention module returns beside its output, (B·G, H, q, k) → (B, G, H,
    q, k); None where this call returned none (a declared adapter's probe: its layer goes without P).
    The generic path's own probe, :func:`condcli.adapters.generic.probs.returned_probs`, refuses instead."""
    if not isinstance(output, tuple):
        return None
    for t in reversed(output[1:]):
        if isinstance(t, torch.Tensor) and t.ndim == 4 and t.shape[0] % batch == 0 and stochastic(t):
            return grouped(t, batch, grouping)
    return None


def _window(attn: Any) -> int | None:
    """A local attention mask's width: HF ``sliding_window`` (causal, the last w keys) or ModernBERT's
    ``local_attention`` (±w keys); None for global attention."""
    return local_window(attn)


def matches(model: nn.Module) -> bool:
    return True


def build(model: nn.Module) -> Adapter:
    name = type(model).__name__
    seq_first = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention) and not m.batch_first]
    if seq_first:
        raise Refused(
            "qkv-unreadable",
            f"{name} runs nn.MultiheadAttention with batch_first=False (sequence, batch, width): between X"
            " and q/k/v the sequence axis comes first, and the generic adapter reads (batch, tokens, width):"
            " it would take the sequence for the batch",
            "build the model with batch_first=True (the weights are the same)",
        )
    inside = _positions_inside(model)
    images = getattr(model, "main_input_name", "pixel_values") == "pixel_values"
    vision = vision_plan(model, inside) if images else None
    if vision is not None:
        entries, embedding = vision.entries, vision.embedding
        notes = [
            f"generic adapter: {name} is not a known family; {len(entries)} attention layers found, "
            "in the order the model calls them",
            *vision.notes,
        ]
    else:
        entries, embedding, notes = _text_plan(model, inside)
    if inside is not None:
        notes.append(
            f"μ(LA) is the bound for the unrotated, unbiased projections (Proposition 4.2 takes Q = A_l W_Q, "
            f"K = A_l W_K); this model applies its {inside.split(',')[0]} inside attention"
        )
    layers: list[LayerSpec] = []
    rotary_inside = inside is not None and inside.startswith("rotary")
    hf_eager = hasattr(model, "config") and hasattr(model, "set_attn_implementation")
    for i, e in enumerate(entries):
        attn, r, block_name = e.attn, e.reading, e.name.split("#")[0]
        first_call = "#" not in e.name or e.name.endswith("#call0")
        if r.heads is None:
            if first_call:
                notes.append(f"{block_name}: number of heads not found; W_Q/W_K/W_V treated as one head")
        elif i == 0:
            notes.append(f"{block_name}: {_describe(attn, r)}")
        heads, kv_heads = (r.heads, r.kv_heads) if r.heads is not None else (1, 1)
        if first_call and not r.known:
            notes.append(
                f"{block_name}: the layout of {type(attn).__name__}.{r.kind} is not known; "
                "split as [Q | K | V] (a guess)"
            )
        if i == 0 and kv_heads < heads:
            notes.append(
                f"grouped-query attention: {heads} query heads share {kv_heads} key/value heads; "
                "per-head κ(W_K), κ(W_V) are those of the KV head each query head reads"
            )
        softmax = next((m for m in attn.modules() if isinstance(m, nn.Softmax)), None)
        probs = Probe(softmax, partial(module_probs, heads, e.grouping), after=True) if softmax else None
        mixing = None
        if probs is None and gated(attn):  # ConViT: P the content softmax, M the gated mix
            probs, mixing = gated_probe(attn, heads), gated_mixing(attn)
        # what an attention whose code computes no softmax returns as its "weights" is no P (YOSO returns
        # its context twice): the code says so below, whatever it returns
        returned = probs is None and hf_eager and returns_weights(attn) and computes_softmax(attn)
        sunk = sink(attn) if returned else None
        if returned:  # HF attention returns (output, weights) under eager attention
            rows: Rows = "at most one" if sunk else "one"
            probs = Probe(attn, partial(returned_probs, e.name, rows, e.grouping, heads), after=True)
            if i == 0:
                notes.append(
                    "P: the attention weights each attention module returns under eager attention "
                    "(switched on for the capture)"
                )
            if sunk and first_call and not any("sink" in n for n in notes):
                notes.append(
                    f"{block_name}: {type(attn).__name__} adds a learned sink ('{sunk}') to the keys and "
                    "drops its column after the softmax: P's rows sum to less than 1, and κ(P), μ(A), H(P) "
                    "are of that matrix, the one that multiplies V"
                )
        why = None  # else: the softmax the attention computes as a function, observed inside its call
        if probs is None:
            probs, why = softmax_probe(attn, heads, e.softmaxes)
            if probs is not None and e.grouping == "inner":
                probs = replace(probs, take=partial(tapped, heads, e.grouping))
            if probs is not None and not any(n.startswith("P: the softmax") for n in notes):
                notes.append("P: the softmax each attention computes, observed inside its call")
        # where nothing computes P over the keys, probs stays None and the layer's probs_note says why
        window = _window(attn) if returned else None
        what = e.attention if why is None else f"{type(attn).__name__} (no softmax over the keys)"
        what = f"{what}; {GATED_WORDS}" if mixing is not None else what
        if sunk:
            what += ", with a learned sink whose column is dropped (rows sum to < 1)"
        layers.append(
            LayerSpec(
                index=i,
                name=e.name,
                attention=what,
                heads=heads,
                x_in=e.x_in,
                attn_in=e.attn_in,
                probs=probs,
                weights=r.weights,
                causal=returned and _causal(attn),
                window=window,
                no_probs=why or LayerSpec.no_probs,
                rotation=rotation(model, attn, i) if vision is None and rotary_inside else None,
                mixing=mixing,
                qkv_source="generic (unverified)",  # until proven on the first batch (generic_verify)
                alternatives=r.alternatives,
            )
        )
    if any(spec.rotation is not None for spec in layers):
        notes.append(
            "κ(LA) actual: with the model's own rotation of q and k at positions 0…n−1 (biases and q/k norms "
            "left out, as in μ(LA)); μ(LA) bounds the unrotated κ(LA), given per head as kappa_la_unrotated"
        )
    elif inside is not None:
        notes.append(
            f"κ(LA) actual: of the same unrotated, unbiased projections ({inside.split(',')[0]} not applied)"
        )
    is_hf = hasattr(model, "config") and getattr(model, "main_input_name", "") == "input_ids"
    return Adapter(
        family="generic",
        model=model,
        embedding=embedding,
        layers=tuple(layers),
        input_kind="images" if images and not is_hf else "text",
        notes=tuple(notes),
        forward=hf_forward(model, [e.attn for e in entries])
        if hf_eager
        else None
        if hasattr(model, "config")
        else partial(_plain_forward, model),
        fused_flags=fused_flags(model),
    )


def _plain_forward(model: nn.Module, inputs: dict[str, Any]) -> Any:
    """A plain module (no config: timm, a bare torch model) run on its images positionally, on anything
    else by keyword."""
    if set(inputs) == {"pixel_values"}:
        return model(inputs["pixel_values"])
    return model(**inputs)


STANDARD = ("separate", "mha", *FUSED)  # the projections generic_heads reads and describes


def _describe(attn: nn.Module, r: Reading) -> str:
    """The guesses made reading ``attn``: generic_heads' words for its own kinds, else the reader's kind."""
    if r.kind in STANDARD and r.heads is not None:
        return describe(attn, r.heads, r.kv_heads)
    return f"{r.heads} heads ({type(attn).__name__}); Q, K, V from {r.kind}"


def _text_plan(model: nn.Module, inside: str | None) -> tuple[tuple[Entry, ...], EmbeddingPoint, list[str]]:
    """The layers of a text model (or of a vision model the trace could not read): the longest list of
    blocks, each call of a shared block its own layer; X is the first block's input."""
    name = type(model).__name__
    found = _blocks(model)
    if found is None:  # why, from what one forward shows (no-attention, linear attention, unreadable q/k/v)
        raise refusal(model, no_attention(model))
    path, blocks = found
    notes = [f"generic adapter: {name} is not a known family; blocks found at '{path}' ({len(blocks)})"]
    absolute = _absolute_position(model, path)
    where = f"positions enter inside attention ({inside})" if inside else None
    if absolute is not None:
        notes.append(f"X is the first block's input, after the position embedding '{absolute}'")
    elif where is not None:
        notes.append(f"X is the first block's input and carries no position encoding: {where}")
    else:
        notes.append("X is the first block's input (where position encoding happens was not identified)")
    if absolute is not None and where is not None:
        notes.append(f"positions also enter inside attention ({inside})")
    order = _shared(model)
    if order is not None:
        notes.append(
            f"shared layers: {len(order)} layers run {len({id(b) for _, b in order})} blocks in turn; "
            "each call of a block is its own layer, in call order (named '#callK')"
        )
    else:
        order = list(blocks)
    first_block = order[0]
    without = [(n, b) for n, b in order if attention_of(b) is None]
    if without:
        mixers = sorted({type(m).__name__ for _, b in without if (m := mixer_of(b)) is not None})
        what = (
            f"their token mixers ({', '.join(mixers)}) compute no softmax"
            if mixers
            else "no attention module"
        )
        order = [(n, b) for n, b in order if attention_of(b) is not None]
        notes.append(
            f"hybrid: {len(order)} of {len(blocks)} blocks hold attention and are analysed "
            f"({_indices(path, [n for n, _ in order])}); no attention in blocks "
            f"{_indices(path, [n for n, _ in without])} ({what}): not analysed"
        )
    entries = []
    for block_name, block in order:
        attn = attention_of(block)
        assert attn is not None
        r = read(attn)
        assert r is not None  # attention_of found its projections
        entries.append(
            Entry(
                block_name,
                block,
                attn,
                r,
                Probe(block, first_input, after=False),
                Probe(attn, _tokens, after=False),
                "outer",
                "softmax attention (generic; details unknown)",
            )
        )
    embedding = EmbeddingPoint(
        first_block[1],
        first_block[0].split("#")[0],
        f"input of the first block (after the position embedding {absolute})"
        if absolute is not None
        else f"input of the first block (generic adapter; {where})"
        if where is not None
        else "input of the first block (generic adapter)",
        after_position_encoding=absolute is not None,
        at_input=True,
    )
    return tuple(entries), embedding, notes


def _indices(path: str, names: list[str]) -> str:
    """Block names under ``path``, as their indices where they are its elements ('1, 3')."""
    return ", ".join(n.removeprefix(f"{path}.") for n in names)
