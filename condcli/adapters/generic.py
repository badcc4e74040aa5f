"""Fallback for other models: find a stack of blocks with Q/K/V projections and say what is missing.

X is the first block's input: after the learned absolute position embedding when the model has one outside
the blocks (by its name), else carrying none, with where positions enter instead (rotary, ALiBi, a relative
bias) where the model says so. P is an ``nn.Softmax`` module's output or, for HF models, the weights the
attention returns under eager attention. A block shared by several layers (ALBERT) gives one layer per call.
"""

from __future__ import annotations

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
    first_output,
    fused_flags,
    group_probs,
    group_tokens,
)
from condcli.adapters.generic_heads import attention_in, count_heads, fused_layout, head_weights, projections
from condcli.adapters.softmax_tap import softmax_probe
from condcli.errors import InputError


def _blocks(model: nn.Module) -> tuple[str, nn.ModuleList] | None:
    """The longest ModuleList/Sequential whose every element contains an attention module."""
    best: tuple[str, nn.ModuleList] | None = None
    for name, mod in model.named_modules():
        if not isinstance(mod, nn.ModuleList | nn.Sequential) or len(mod) == 0:
            continue
        if all(attention_in(b) is not None for b in mod) and (best is None or len(mod) > len(best[1])):
            best = (name, mod)  # type: ignore[assignment]
    return best


# attention classes that mask causally without saying so in an ``is_causal`` attribute
CAUSAL_ATTENTION = ("BloomAttention",)


def _causal(attn: nn.Module) -> bool:
    """Whether the attention's returned weights are causally masked (HF ``is_causal``, or a known class)."""
    classes = {c.__name__ for c in type(attn).__mro__}
    return bool(getattr(attn, "is_causal", False)) or bool(classes.intersection(CAUSAL_ATTENTION))


# a learned absolute position embedding: a part of the last piece of its module or parameter name (SPEC §1)
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
    for name, mod in model.named_modules():
        words = (name.rsplit(".", 1)[-1].lower(), type(mod).__name__.lower())
        for part, how in INSIDE:
            if any(part in w for w in words):
                return how
    return None


def _calls(model: nn.Module, blocks: int) -> int:
    """How many times each block runs in one forward pass: ALBERT's config shares ``num_hidden_groups``
    blocks among ``num_hidden_layers`` layers, each block running for a run of consecutive layers; else 1."""
    config = getattr(model, "config", None)
    total = getattr(config, "num_hidden_layers", None)
    groups = getattr(config, "num_hidden_groups", None)
    if isinstance(total, int) and groups == blocks and total > blocks and total % blocks == 0:
        return total // blocks
    return 1


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


def _probs(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    return group_probs(first_output(args, kwargs, output, batch), batch)  # nn.Softmax output


def _returned_probs(
    args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int
) -> torch.Tensor | None:
    """The attention weights an HF attention module returns beside its output, (B·G, H, q, k) → (B, G, H,
    q, k); None where this call returned none.

    Modules return other 4-D tensors too (T5: its position bias before the weights), so the one taken is
    the last that is a probability matrix over the keys: entries in [0, 1], each row summing to 1.
    """
    if not isinstance(output, tuple):
        return None
    for t in reversed(output[1:]):
        if isinstance(t, torch.Tensor) and t.ndim == 4 and t.shape[0] % batch == 0 and _stochastic(t):
            return group_probs(t, batch)
    return None


def _stochastic(t: torch.Tensor) -> bool:
    """Entries in [0, 1] and rows summing to 1, within the rounding of the dtype P was computed in."""
    if not t.is_floating_point() or t.numel() == 0:
        return False
    tol = 64 * torch.finfo(t.dtype).eps  # a power of two: 1 + tol is exact in t's own dtype
    t = t.detach()
    rows = t.sum(-1, dtype=torch.float64)  # no float64 copy of P itself: this runs on every call
    return bool(t.min() >= 0 and t.max() <= 1 + tol and ((rows - 1).abs() <= tol * t.shape[-1]).all())


def _window(attn: Any) -> int | None:
    """A local attention mask's width: HF ``sliding_window`` (causal, the last w keys) or ModernBERT's
    ``local_attention`` (±w keys); None for global attention."""
    sliding = getattr(attn, "sliding_window", None)
    if isinstance(sliding, int) and not isinstance(sliding, bool) and sliding > 0:
        return sliding
    local = getattr(attn, "local_attention", None)
    if isinstance(local, tuple) and len(local) == 2 and isinstance(local[1], int) and local[1] >= 0:
        return local[1]
    return None


def matches(model: nn.Module) -> bool:
    return True


def build(model: nn.Module) -> Adapter:
    found = _blocks(model)
    name = type(model).__name__
    if found is None:
        raise InputError(
            f"condcli does not know the family of {name} and found no stack of blocks with Q/K/V projections",
            "supported: timm ViT/DeiT/Swin/XCiT/DaViT, HF BERT/RoBERTa/GPT-2/ViT/Nyströmformer;"
            " open an issue for others",
        )
    path, blocks = found
    seq_first = [m for m in model.modules() if isinstance(m, nn.MultiheadAttention) and not m.batch_first]
    if seq_first:
        raise InputError(
            f"{name} runs nn.MultiheadAttention with batch_first=False (sequence, batch, width): the "
            "generic adapter reads (batch, tokens, width) and would take the sequence for the batch",
            "build the model with batch_first=True (the weights are the same)",
        )
    notes = [f"generic adapter: {name} is not a known family; blocks found at '{path}' ({len(blocks)})"]
    absolute, inside = _absolute_position(model, path), _positions_inside(model)
    where = f"positions enter inside attention ({inside})" if inside else None
    if absolute is not None:
        notes.append(f"X is the first block's input, after the position embedding '{absolute}'")
    elif where is not None:
        notes.append(f"X is the first block's input and carries no position encoding: {where}")
    else:
        notes.append("X is the first block's input (where position encoding happens was not identified)")
    if absolute is not None and where is not None:
        notes.append(f"positions also enter inside attention ({inside})")
    calls = _calls(model, len(blocks))
    if calls > 1:
        notes.append(
            f"shared layers: each block of '{path}' runs {calls} times in a row; each call is its own layer "
            f"({calls * len(blocks)} layers, named '#callK')"
        )
    layers: list[LayerSpec] = []
    hf_eager = hasattr(model, "config") and hasattr(model, "set_attn_implementation")
    for i in range(calls * len(blocks)):
        b, call = divmod(i, calls)
        block = blocks[b]
        attn = attention_in(block)
        assert attn is not None
        counts = count_heads(attn)
        if counts is None:
            counts = (1, 1)
            if call == 0:
                notes.append(f"{path}.{b}: number of heads not found; W_Q/W_K/W_V treated as one head")
        heads, kv_heads = counts
        kind = (projections(attn) or ("separate",))[0]
        if call == 0 and kind not in ("separate", "mha") and not fused_layout(attn, kind)[1]:
            notes.append(
                f"{path}.{b}: the layout of {type(attn).__name__}.{kind} is not known; "
                "split as [Q | K | V] (a guess)"
            )
        if i == 0 and kv_heads < heads:
            notes.append(
                f"grouped-query attention: {heads} query heads share {kv_heads} key/value heads; "
                "per-head κ(W_K), κ(W_V) are those of the KV head each query head reads"
            )
        softmax = next((m for m in attn.modules() if isinstance(m, nn.Softmax)), None)
        probs = Probe(softmax, _probs, after=True) if softmax is not None else None
        returned = probs is None and hf_eager
        if returned:  # HF attention returns (output, weights) under eager attention
            probs = Probe(attn, _returned_probs, after=True)
            if i == 0:
                notes.append(
                    "P: the attention weights each attention module returns under eager attention "
                    "(switched on for the capture)"
                )
        why = None  # else: the softmax the attention computes as a function, observed inside its call
        if probs is None:
            probs, why = softmax_probe(attn, heads)
            if probs is not None and not any(n.startswith("P: the softmax") for n in notes):
                notes.append("P: the softmax each attention computes, observed inside its call")
        # where nothing computes P over the keys, probs stays None and the layer's probs_note says why
        window = _window(attn) if returned else None
        layers.append(
            LayerSpec(
                index=i,
                name=f"{path}.{b}" if calls == 1 else f"{path}.{b}#call{call}",
                attention="softmax attention (generic; details unknown)",
                heads=heads,
                x_in=Probe(block, first_input, after=False),
                attn_in=Probe(attn, _tokens, after=False),
                probs=probs,
                weights=partial(head_weights, attn, heads, kv_heads),
                causal=returned and _causal(attn),
                window=window,
                no_probs=why or LayerSpec.no_probs,
            )
        )
    is_hf = hasattr(model, "config") and getattr(model, "main_input_name", "") == "input_ids"
    images = getattr(model, "main_input_name", "pixel_values") == "pixel_values"
    first = blocks[0]
    return Adapter(
        family="generic",
        model=model,
        embedding=EmbeddingPoint(
            first,
            f"{path}.0",
            f"input of the first block (after the position embedding {absolute})"
            if absolute is not None
            else f"input of the first block (generic adapter; {where})"
            if where is not None
            else "input of the first block (generic adapter)",
            after_position_encoding=absolute is not None,
            at_input=True,
        ),
        layers=tuple(layers),
        input_kind="images" if images and not is_hf else "text",
        notes=tuple(notes),
        forward=None if hasattr(model, "config") else (lambda inputs: model(inputs["pixel_values"])),
        fused_flags=fused_flags(model),
    )
