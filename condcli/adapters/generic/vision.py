"""The generic path on a vision model: every attention layer in call order, X, X_l and A_l in their layouts.

:mod:`condcli.adapters.generic.blocks` finds the layers with one trial forward; this module turns what it
found into probes and says, in words, where X is and which position encoding precedes it (docs/math.md#x): the
absolute or convolutional ones that run before the first attention (X follows them), those that run only
later (Twins' PEG after the first block: X carries none), and positions that enter inside attention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import EmbeddingPoint, Probe
from condcli.adapters.generic.attn import Reading
from condcli.adapters.generic.blocks import TRACE_BATCH, Discovery, Found, discover
from condcli.adapters.generic.layouts import Grouping, attention_input, stream_input
from condcli.adapters.generic.trace import Trace
from condcli.adapters.nested_config import setting
from condcli.reports.refusal import Refused

Tensor = torch.Tensor
# a position encoding added to the tokens: a part of the last piece of its module or parameter name
POSITION = ("pos_embed", "position_embedding", "embed_positions", "pixel_pos", "patch_pos", "pos_block")
POSITION_CONV = ("cpe", "pos_conv", "peg")  # convolutional (conditional) position encodings
PRE_NORMS = ("pre_layrnorm", "norm_pre", "ln_pre", "pre_norm")  # a norm between the embeddings and the blocks
SIZES = (224, 256, 32, 64, 128, 96, 160, 192, 240, 384)


@dataclass(frozen=True)
class Entry:
    """One attention layer: its probes and what it computes, in words."""

    name: str
    block: nn.Module
    attn: nn.Module
    reading: Reading
    x_in: Probe
    attn_in: Probe
    grouping: Grouping  # how the attention's (and its P's) leading axis holds the images
    attention: str
    softmaxes: int = 0  # the most softmaxes over the keys one call ran in the trial forward (0: not run)


@dataclass(frozen=True)
class Plan:
    entries: tuple[Entry, ...]
    embedding: EmbeddingPoint
    notes: tuple[str, ...]


def example_images(model: nn.Module) -> list[Tensor]:
    """Trial inputs for the trace, two identical random images (clips of ``num_frames`` frames for a video
    model) each, at the sizes the model may be built for: what it says it was built for first (timm
    ``patch_embed.img_size`` / ``img_size``, its pretrained config, an HF config's ``image_size``), then
    common sizes."""
    param = next(model.parameters())
    config = getattr(model, "config", None)
    channels = int(getattr(config, "num_channels", 3) or 3)
    sizes: list[tuple[int, int]] = []
    for value in (
        getattr(getattr(model, "patch_embed", None), "img_size", None),
        getattr(model, "img_size", None),
        (getattr(model, "pretrained_cfg", None) or {}).get("input_size", (None,))[1:],
        # an HF config's image size, else its vision_config's (SAM) or another nested config's (SAM 2's
        # vision_config.backbone_config): the size the inputs are made at
        setting(config, "image_size", ("vision_config",)) if config is not None else None,
    ):
        size = _pair(value)
        if size is not None and size not in sizes:
            sizes.append(size)
    cfg = getattr(model, "pretrained_cfg", None) or {}
    if isinstance(cfg.get("input_size"), tuple | list) and len(cfg["input_size"]) == 3:
        channels = int(cfg["input_size"][0])
    sizes += [(s, s) for s in SIZES if (s, s) not in sizes]
    frames = clip_frames(model)  # a video model reads clips (B, T, C, H, W)
    clip = (frames,) if frames is not None else ()
    gen = torch.Generator().manual_seed(0)
    out = []
    for h, w in sizes:
        one = torch.randn(1, *clip, channels, h, w, generator=gen)
        out.append(one.expand(TRACE_BATCH, *one.shape[1:]).to(param.device, param.dtype))
    return out


def clip_frames(model: nn.Module) -> int | None:
    """Frames per clip where ``model`` reads video (B, T, C, H, W): its config has ``num_frames`` and it
    embeds with a 3-D convolution or its family has a video processor in transformers (VideoMAE, ViViT,
    TimeSformer); None for an image model, also one with a frame count that reads frames one by one
    (X-CLIP's vision encoder)."""
    config = getattr(model, "config", None)
    frames = getattr(config, "num_frames", None)
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        return None
    if any(isinstance(m, nn.Conv3d) for m in model.modules()):
        return frames
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    return frames if getattr(config, "model_type", None) in VIDEO_PROCESSOR_MAPPING_NAMES else None


def _pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, value
    if (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, int) and v > 0 for v in value)
    ):
        return int(value[0]), int(value[1])
    return None


def runner(model: nn.Module) -> Callable[[Tensor], Any]:
    """How the model is called on pixels (HF models by keyword)."""
    if hasattr(model, "config"):
        return lambda pixels: model(pixel_values=pixels)
    return lambda pixels: model(pixels)


def plan(model: nn.Module, inside: str | None) -> Plan | None:
    """The vision model's attention layers and X; None where it has no attention the generic path reads.
    ``inside``: how positions enter inside attention, where the model says so."""
    found = discover(model, runner(model), example_images(model))
    if found is None or not found.layers:
        return None
    notes = list(found.notes)
    counted = found.trace.softmaxes if found.trace is not None else {}
    entries = tuple(_entry(f, counted.get(id(f.attn), 0)) for f in found.layers)
    first = found.layers[0]
    before, later, encoding, norms = _positions(model, found)
    emb = found.embedding
    first_block = first.name.split("#")[0]
    if emb is not None:
        point, at_input, layout, where, what, enters = (
            emb.module,
            emb.at_input,
            emb.layout,
            emb.name,
            emb.what,
            emb.enters,
        )
        if emb.note:
            notes.append(emb.note)
    else:
        _whole_samples(found)
        point, at_input, layout = first.block, True, "tokens"
        where, what, enters = first_block, f"input of {first_block}", first_block
    lead = (
        f"{what}, the first attention block"
        if what == f"input of {enters}"
        else f"{what}, the tokens entering the first attention block '{enters}'"
    )
    if before:
        kind = "encoding" if all(_named(b, POSITION_CONV) for b in before) else "embedding"
        then = f", then the norm {', '.join(norms)}" if norms else ""
        description = f"{lead} (after the position {kind} {', '.join(before)}{then})"
    elif later:
        description = f"{lead}; it carries no position encoding: {later[0]} runs only after that block"
    elif inside:
        description = f"{lead}; it carries no position encoding: positions enter inside attention ({inside})"
    else:
        description = f"{lead} (no position encoding was identified)"
    notes.insert(0, f"X is the {description}")
    if encoding:
        notes.append(encoding)
    if inside and (before or later):
        notes.append(f"positions also enter inside attention ({inside})")
    other = [f.name for f in found.layers if f.reading.queries or f.reading.keys]
    if other:
        notes.append(
            f"{len(other)} layer(s) take Q or K/V from other tokens than A_l's (P is q × k; each layer's "
            "attention says which): μ(LA) and κ(LA) there are those of A_l's own tokens (Proposition 4.2)"
        )
    embedding = EmbeddingPoint(
        point, where, description, layout=layout, after_position_encoding=bool(before), at_input=at_input
    )
    return Plan(entries, embedding, tuple(notes))


def _whole_samples(found: Discovery) -> None:
    """X taken as the first block's input must hold the trial's samples whole: a model that regroups them
    before its first attention (TimeSformer's divided space-time attention reads (B·patches, frames, d))
    is refused, not analysed on groups taken for samples."""
    calls = found.trace.of(found.layers[0].block) if found.trace is not None else []
    x = calls[0].inp if calls else None
    if x is not None and x.ndim == 3 and x.shape[0] != TRACE_BATCH:
        name = found.layers[0].name
        raise Refused(
            "qkv-unreadable",
            f"the first attention block '{name}' reads its tokens regrouped ({x.shape[0]} groups for"
            f" {TRACE_BATCH} samples), and no module hands it the samples whole: between X and q/k/v the"
            " samples' tokens are regrouped, so X cannot be placed as (B, N, d) here",
            "describe the model's embedding and blocks in a TOML file passed as `adapter` "
            "(docs/guides/your-own-model.md)",
        )


def _entry(f: Found, softmaxes: int) -> Entry:
    width = f.reading.width
    x_in = Probe(f.stream, partial(stream_input, width, f.stream_layout, f.stream_grouping), after=False)
    attn_in = Probe(f.attn, partial(attention_input, width, f.attn_layout, f.grouping), after=False)
    words = _words(f.reading, f.groups)
    return Entry(f.name, f.block, f.attn, f.reading, x_in, attn_in, f.grouping, words, softmaxes)


def _words(r: Reading, groups: tuple[int, int] | None) -> str:
    """What P is, in words (docs/math.md#layers: a non-square P is named)."""
    where = (
        f" {r.windows}" if r.windows else f" in {groups[0]} groups of {groups[1]} tokens" if groups else ""
    )
    parts = [f"Q: {r.queries}"] * bool(r.queries) + [f"K/V: {r.keys}"] * bool(r.keys)
    return "softmax" + where + (" (" + "; ".join(parts) + ")" if parts else "")


def _named(name: str, words: tuple[str, ...]) -> bool:
    """Whether the last non-index piece of a module or parameter path names a position encoding."""
    last = next((p for p in reversed(name.lower().split(".")) if not p.isdigit()), "")
    return "rel" not in last and "crpe" not in last and any(w in last for w in words)


def _positions(model: nn.Module, found: Discovery) -> tuple[list[str], list[str], str | None, list[str]]:
    """(position encodings that precede X, those that run only after the first block, a note on what X
    follows when it is a convolutional encoding's output, the pre-norms that run between them and X)."""
    trace: Trace | None = found.trace
    first_block = found.layers[0].block
    before: list[str] = []
    later: list[str] = []
    norms: list[str] = []
    if trace is not None:
        start = next(c.order for c in trace.calls if c.module is found.layers[0].attn)
        entry = next((c.order for c in trace.calls if c.module is first_block), start)
        x_at = found.embedding.module if found.embedding is not None else first_block
        x_order = next((c.order for c in trace.calls if c.module is x_at), entry)
        seen: set[str] = set()
        norms = [c.name for c in trace.calls if c.order < x_order and c.name.rsplit(".", 1)[-1] in PRE_NORMS]
        for c in trace.calls:
            if c.name in seen or not _named(c.name, POSITION + POSITION_CONV):
                continue
            seen.add(c.name)
            if c.order <= x_order or (c.module is x_at and found.embedding and not found.embedding.at_input):
                before.append(c.name)
            elif c.order > start:
                later.append(c.name)
    inside_blocks = {f.name.split("#")[0] for f in found.layers}
    emb = found.embedding
    width = _x_width(found)
    for name, p in model.named_parameters():
        owner = name.rsplit(".", 1)[0] if "." in name else ""
        if any(owner == b or owner.startswith(f"{b}.") for b in inside_blocks) or not _named(name, POSITION):
            continue
        if p.shape[-1] == width:  # a position embedding as wide as X (CrossViT: its branch)
            before.append(name)
    note = None
    if emb is not None and not emb.at_input and _named(emb.name, POSITION_CONV):
        note = (
            f"X is the output of '{emb.name}', a convolutional position encoding, as the first block reads it"
        )
    return list(dict.fromkeys(before)), list(dict.fromkeys(later)), note, list(dict.fromkeys(norms))


def _x_width(found: Discovery) -> int:
    """X's width: the channel count of the tensor the embedding point hands over."""
    return found.embedding.width if found.embedding is not None else found.layers[0].reading.width
