"""The generic adapter's reading of one attention module: its Q/K/V projections, head counts and weights.

Fused projections are split the way the family splits them (docs/math.md#layers): :data:`FUSED_LAYOUTS` says,
per fused projection and attention class, how Q, K and V lie along its output rows (see :func:`fused_rows`).
"""

from __future__ import annotations

import inspect
import sys
from functools import partial
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import FusedLayout, HeadWeights, Rotation, fused_qkv, head_split
from condcli.adapters.generic.maps import Orientation, linear_map, param_map, param_projections
from condcli.adapters.generic.probs import weights_on_request as on_request

SEPARATE = (
    ("q", "k", "v"),
    ("query", "key", "value"),
    ("q_proj", "k_proj", "v_proj"),
    ("q_lin", "k_lin", "v_lin"),
    ("wq", "wk", "wv"),
    ("query_proj", "key_proj", "value_proj"),  # DeBERTa-v2
    ("q_head", "k_head", "v_head"),
    ("linear_q", "linear_k", "linear_v"),  # conformer-style blocks (Wav2Vec2-Conformer, SeamlessM4T)
    ("to_q", "to_k", "to_v"),
    ("q_linear", "k_linear", "v_linear"),
    ("proj_q", "proj_k", "proj_v"),
    ("project_q", "project_k", "project_v"),  # CPM-Ant
)
FUSED = ("qkv", "in_proj", "Wqkv", "qkv_proj", "query_key_value", "c_attn", "att_proj")  # att_proj: Bark
PARAMS = "its own parameters"  # the projections' kind where W_Q, W_K, W_V are plain parameters
HEAD_ATTRS = ("num_heads", "num_attention_heads", "n_head", "n_heads", "nhead", "heads")
KV_HEAD_ATTRS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "kv_heads")

# (fused projection, attention class (any in its MRO), attribute of the attention that must be true, layout),
# first match wins; "*" matches any. Each is read from the family's forward in transformers 5 (how it splits
# the projection's output), and proven on the model's first batch (:mod:`condcli.adapters.generic.verify`).
FUSED_LAYOUTS: tuple[tuple[str, str, str | None, FusedLayout], ...] = (
    # qkv.view(..., mp_num, 3·local).split(local) → query, value, key; mp_num = 4 in CodeGenAttention
    ("qkv_proj", "CodeGenAttention", None, "sharded_qvk"),
    # _split_heads: view(..., H, 3, d_h)
    ("query_key_value", "PersimmonAttention", None, "per_head"),
    # multi_query: split((d, kv_dim, kv_dim)) with kv_dim = d_h; else view(..., H, 3·d_h).split(d_h)
    ("c_attn", "GPTBigCodeAttention", "multi_query", "stacked"),
    ("c_attn", "GPTBigCodeAttention", None, "per_head"),
    ("query_key_value", "FalconAttention", "new_decoder_architecture", "per_group"),
    ("query_key_value", "FalconAttention", "multi_query", "stacked"),  # [Q | K (d_h) | V (d_h)]
    ("query_key_value", "FalconAttention", None, "per_head"),
    ("query_key_value", "GPTNeoXAttention", None, "per_head"),  # .view(..., H, 3·d_h).chunk(3, -1)
    ("query_key_value", "BloomAttention", None, "per_head"),
    ("*", "*", None, "stacked"),  # timm qkv, Phi-3 qkv_proj, ModernBERT Wqkv, nn.MultiheadAttention
)


def projections(module: nn.Module) -> tuple[str, tuple[nn.Module, ...]] | None:
    """("separate", (q, k, v)), (fused name, (qkv,)), ("mha", (mha,)) or (:data:`PARAMS`, (module,)) when
    ``module`` holds the projections.

    Names are compared in lower case (``Wq``, ``Wk``, ``Wv``); a separate projection is any affine map
    :func:`~condcli.adapters.generic.maps.linear_map` reads (nn.Linear, 1×1 Conv1d/Conv2d, with a folded
    BatchNorm); ``params``: W_Q, W_K, W_V held as plain parameters. A fused projection is taken when its
    width splits into three equal parts or the module names its KV head count (grouped-query attention,
    e.g. Phi-3's (H + 2·H_kv)·d_h rows).
    """
    children = {n.lower(): c for n, c in module.named_children()}
    for names in SEPARATE:
        found = [children.get(n) for n in names]
        if all(linear_map(c) is not None for c in found):
            return "separate", tuple(c for c in found if c is not None)
    for name in FUSED:
        lin = children.get(name.lower())
        mapped = linear_map(lin) if isinstance(lin, nn.Linear) or type(lin).__name__ == "Conv1D" else None
        if mapped is not None and (mapped[0].shape[0] % 3 == 0 or count(module, KV_HEAD_ATTRS)):
            assert lin is not None
            return name, (lin,)
    if isinstance(module, nn.MultiheadAttention) and module.in_proj_weight is not None:
        return "mha", (module,)
    if param_projections(module) is not None:
        return PARAMS, (module,)
    return None


def _out_width(m: nn.Module) -> int:
    mapped = linear_map(m)
    assert mapped is not None
    return int(mapped[0].shape[0])


def attention_in(block: nn.Module) -> nn.Module | None:
    """The first submodule of ``block`` that holds Q/K/V projections."""
    for sub in block.modules():
        if projections(sub) is not None:
            return sub
    return None


def count(attn: Any, names: tuple[str, ...]) -> int | None:
    """The first positive int among ``attn``'s attributes ``names``, then its config's (HF attention)."""
    for owner in (attn, getattr(attn, "config", None)):
        for name in names:
            value = getattr(owner, name, None) if owner is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def fused_layout(attn: nn.Module, projection: str) -> tuple[FusedLayout, bool]:
    """The layout of ``attn``'s fused ``projection`` and whether it is known (False: [Q|K|V] assumed)."""
    classes = {c.__name__ for c in type(attn).__mro__}
    for name, cls, switch, layout in FUSED_LAYOUTS:
        if name in ("*", projection) and cls in classes | {"*"}:
            if switch is None or getattr(attn, switch, False) is True:
                return layout, not (cls == "*" and projection == "query_key_value")
    raise AssertionError("FUSED_LAYOUTS ends with a catch-all")


def read_from_source(attn: nn.Module, projection: str) -> bool:
    """Whether ``attn``'s fused ``projection`` has a layout row of its own in :data:`FUSED_LAYOUTS` (read
    from its family's source), not only the catch-all [Q | K | V]."""
    classes = {c.__name__ for c in type(attn).__mro__}
    return any(
        name == projection and cls in classes and (switch is None or getattr(attn, switch, False) is True)
        for name, cls, switch, _ in FUSED_LAYOUTS
    )


def count_heads(attn: Any) -> tuple[int, int] | None:
    """(query heads, key/value heads): from the module's or its config's head counts, else from
    ``head_dim`` and the projection widths (Llama-style attention keeps only ``head_dim``); checked against
    a fused projection's width."""
    h = count(attn, HEAD_ATTRS)
    kv = count(attn, KV_HEAD_ATTRS)
    found = projections(attn)
    head_dim = count(attn, ("head_dim",))
    if found is not None and found[0] == "separate" and head_dim:
        q, k, _ = found[1]
        q_out, k_out = _out_width(q), _out_width(k)
        if h is None and q_out % head_dim == 0:
            h = q_out // head_dim
        if kv is None and k_out % head_dim == 0 and k_out != q_out:
            kv = k_out // head_dim
    if h is None:
        return None
    if kv is None or h % kv:
        kv = h
    if found is not None and found[0] not in ("separate", "mha", PARAMS):
        layout, _ = fused_layout(attn, found[0])
        rows = _out_width(found[1][0])
        if layout in ("per_head", "sharded_qvk") or rows % (h + 2 * kv):
            kv = h  # the layout holds one K and one V per query head
        if rows % (h + 2 * kv):
            return None
    return h, kv


def head_weights(attn: Any, n_heads: int, kv_heads: int) -> HeadWeights:
    """Per-head W_Q, W_K, W_V of ``attn`` (float64), fused projections split as the family lays them out."""
    found = projections(attn)
    assert found is not None
    kind, mods = found
    if kind == "separate":
        maps = [linear_map(m) for m in mods]
        ws = tuple(m[0].T for m in maps if m is not None)
        bs = tuple(m[1] for m in maps if m is not None)
        return head_split(ws, bs, n_heads, kv_heads)  # type: ignore[arg-type]
    if kind == PARAMS:
        return param_weights(attn, n_heads, kv_heads, "x @ W")
    m: Any = mods[0]
    if kind == "mha":
        return fused_qkv(m.in_proj_weight, m.in_proj_bias, n_heads, n_heads, "stacked")
    layout, _ = fused_layout(attn, kind)
    mapped = linear_map(m)
    assert mapped is not None
    weight, bias = mapped[0], mapped[1] if mapped[1] is not None else beside_bias(attn)
    shards = count(attn, ("mp_num",)) or 1 if layout == "sharded_qvk" else 1
    return fused_qkv(weight, bias, n_heads, kv_heads, layout, shards)


def param_weights(attn: Any, n_heads: int, kv_heads: int, orientation: Orientation) -> HeadWeights:
    """W_Q, W_K, W_V held as plain parameters, read in ``orientation`` (see generic_maps)."""
    found = param_projections(attn)
    assert found is not None
    maps = [param_map(*found[r], orientation) for r in ("q", "k", "v")]
    ws = (maps[0][0].T, maps[1][0].T, maps[2][0].T)
    return head_split(ws, (maps[0][1], maps[1][1], maps[2][1]), n_heads, kv_heads)


def beside_bias(attn: Any) -> torch.Tensor | None:
    """The bias a timm BEiT/EVA attention keeps beside its bias-free fused ``qkv``: [q_bias | k_bias | v_bias]
    (k_bias a zero buffer, or absent: zeros); None where it keeps none."""
    q, v = getattr(attn, "q_bias", None), getattr(attn, "v_bias", None)
    if not isinstance(q, torch.Tensor) or not isinstance(v, torch.Tensor):
        return None
    k = getattr(attn, "k_bias", None)
    return torch.cat((q, k if isinstance(k, torch.Tensor) else torch.zeros_like(q), v))


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def config_window(attn: Any) -> int | None:
    """The sliding window of an HF attention that keeps none of its own but whose model masks every layer
    by its config's ``sliding_window`` (Mistral, Mixtral, Starcoder2, Phi-3); None where the config has
    per-layer ``layer_types`` (each such attention then keeps its own) or switches the window off."""
    config = getattr(attn, "config", None)
    if (
        getattr(config, "layer_types", None) is not None
        or getattr(config, "use_sliding_window", True) is False
    ):
        return None
    return _positive(getattr(config, "sliding_window", None))


def local_window(attn: Any) -> int | None:
    """A local attention mask's width as :func:`condcli.spectra.attention_support` reads it (causal: the
    last w keys; bidirectional: the keys within ±w); None for global attention.

    HF: the attention's own ``sliding_window``, else its config's (:func:`config_window`). A bidirectional HF
    mask allows |i − j| ≤ the config's ``sliding_window`` (ModernBERT's attention keeps that + 1, flash
    attention's convention). Older ModernBERT: ``local_attention`` = (left, right).
    """
    own = _positive(getattr(attn, "sliding_window", config_window(attn)))
    if own is not None:
        if getattr(attn, "is_causal", False):
            return own
        return _positive(getattr(getattr(attn, "config", None), "sliding_window", None)) or own
    local = getattr(attn, "local_attention", None)
    if isinstance(local, tuple) and len(local) == 2 and isinstance(local[1], int) and local[1] >= 0:
        return local[1]
    return None


def rotary(config: Any) -> str:
    """'rotary', with how much of each head it rotates where an HF config says the rotation is partial
    (StableLM, Phi, GPT-NeoX ``partial_rotary_factor``; GPT-J, CodeGen ``rotary_dim``)."""
    params = getattr(config, "rope_parameters", None)
    factor = params.get("partial_rotary_factor") if isinstance(params, dict) else None
    factor = factor or getattr(config, "partial_rotary_factor", None) or getattr(config, "rotary_pct", None)
    dim = getattr(config, "rotary_dim", None)
    if isinstance(dim, int) and not isinstance(dim, bool):
        return f"rotary, on the first {dim} channels of each head"
    if isinstance(factor, float) and 0 < factor < 1:
        return f"rotary, on the first {factor:.0%} of each head's channels"
    return "rotary"


LAYOUT_WORDS: dict[FusedLayout, str] = {
    "stacked": "[Q | K | V] stacked",
    "per_head": "each head's q, k, v side by side",
    "per_group": "each KV group's queries, then its k and v",
    "sharded_qvk": "shards of [q | v | k] (mp_num)",
}


def describe(attn: nn.Module, heads: int, kv_heads: int) -> str:
    """The guesses made reading ``attn``, in words: where its head counts and Q/K/V projections came from."""
    source = next((n for n in HEAD_ATTRS if count(attn, (n,))), None) or "head_dim and the projection widths"
    said = f"{heads} heads ({source})"
    if kv_heads != heads:
        kv_source = next((n for n in KV_HEAD_ATTRS if count(attn, (n,))), None) or "the K projection's width"
        said += f", {kv_heads} key/value heads ({kv_source})"
    found = projections(attn)
    kind = found[0] if found is not None else "separate"
    if kind == "separate":
        mods = found[1] if found is not None else ()
        names = [n for n, c in attn.named_children() if any(c is m for m in mods)]
        return f"{said}; Q, K, V from {', '.join(names)}"
    if kind == PARAMS:
        return f"{said}; Q, K, V from {PARAMS}, read as x @ W unless the first batch proves F.linear(x, W)"
    if kind == "mha":
        return f"{said}; Q, K, V from nn.MultiheadAttention's in_proj, [Q | K | V] stacked"
    layout, known = fused_layout(attn, kind)
    how = LAYOUT_WORDS[layout] + ("" if known else ", a guess")
    return f"{said}; Q, K, V from the fused {kind} ({how})"


def weights_on_request(attn: nn.Module) -> bool:
    """Whether ``attn`` returns its attention weights only when the model is run with output_attentions:
    read from its own forward, for every family (:mod:`condcli.adapters.generic.probs`)."""
    return on_request(attn)


def rotation(model: nn.Module, attn: nn.Module, layer: int) -> Rotation | None:
    """How ``attn`` rotates its queries and keys (RoPE), as a function of per-head q, k (..., n, d_h) at
    positions 0..n−1; None where no rotation is found.

    HF rotary models (transformers 5): the model's own ``rotary_emb`` gives (cos, sin) for the positions
    (per layer type where it takes one: Gemma3, ModernBERT), and the family module's own
    ``apply_rotary_pos_emb`` rotates the first channels they cover (partial rotary: StableLM, Phi, NeoX).
    """
    config = getattr(model, "config", None)
    apply = getattr(sys.modules.get(type(attn).__module__), "apply_rotary_pos_emb", None)
    own = getattr(attn, "rotary_emb", None)
    found = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    emb = own if isinstance(own, nn.Module) else found[0] if found else None
    if emb is None or not callable(apply) or getattr(config, "alibi", False) is True:
        return None
    if getattr(attn, "use_rope", True) in (False, 0):  # a NoPE layer (SmolLM3, Llama 4): no rotation here
        return None
    params = inspect.signature(emb.forward).parameters
    takes = list(inspect.signature(apply).parameters)
    if list(params)[:2] != ["x", "position_ids"] or takes[:4] != ["q", "k", "cos", "sin"]:
        return None  # another convention than transformers 5's: not guessed
    types = getattr(config, "layer_types", None)
    extra = {"layer_type": types[layer]} if "layer_type" in params and types else {}
    return partial(_rotate, emb, apply, extra)


def _rotate(
    emb: nn.Module, apply: Any, extra: dict[str, Any], q: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    buffers = list(emb.buffers())
    device = buffers[0].device if buffers else q.device
    positions = torch.arange(q.shape[-2], device=device)[None]
    with torch.no_grad():  # x only gives the dtype and device: cos, sin (1, n, r) in q's dtype
        cos, sin = emb(torch.empty(0, dtype=q.dtype, device=device), positions, **extra)
    r = int(cos.shape[-1])
    cos, sin = cos.to(q.device), sin.to(q.device)
    # (1, n, r) → (1, 1, n, r) by the family's own unsqueeze: broadcast over groups and heads. Whole heads
    # first: a family whose cos covers half a head (GPT-OSS rotates the two halves) or that splits off the
    # unrotated channels itself; else the first r channels, the rest passed through (partial rotary)
    if r == q.shape[-1] or 2 * r == q.shape[-1]:
        try:
            qr, kr = apply(q, k, cos, sin)
            if qr.shape == q.shape and kr.shape == k.shape:
                return qr, kr
        except RuntimeError:
            pass
    qr, kr = apply(q[..., :r], k[..., :r], cos, sin)
    return torch.cat([qr, q[..., r:]], -1), torch.cat([kr, k[..., r:]], -1)
