"""Attention or not: which token mixers the generic path analyses as attention (docs/math.md#layers).

A module with projections the generic path reads (:func:`condcli.adapters.generic.attn.read`) is an
attention only where its code computes a softmax (over the keys, or over another dimension as factorized
attention does), holds an ``nn.Softmax`` or is an ``nn.MultiheadAttention``, or names its projections q, k
and v (an attention whose P may not exist: linear attention). A state-space mixer (Mamba's fused ``in_proj``,
no softmax anywhere) is not: its block has no attention and is not analysed. A hybrid's attention blocks
are, and the report names the others.
"""

from __future__ import annotations

from torch import nn

from condcli.adapters.generic.attn import Reading, read
from condcli.adapters.generic.heads import projections
from condcli.adapters.softmax_tap import computes_softmax


def is_attention(attn: nn.Module, reading: Reading) -> bool:
    """Whether ``attn``, read as ``reading``, is an attention (see the module's docstring)."""
    return reading.kind == "separate" or computes_softmax(attn)


def attention_of(block: nn.Module) -> nn.Module | None:
    """The first submodule of ``block`` (itself included) with Q/K/V projections
    (:func:`condcli.adapters.generic.heads.projections`) that is an attention."""
    return next((sub for sub in block.modules() if _held(sub) is True), None)


def mixer_of(block: nn.Module) -> nn.Module | None:
    """The first submodule of ``block`` with projections that is no attention (a state-space mixer)."""
    return next((sub for sub in block.modules() if _held(sub) is False), None)


def _held(sub: nn.Module) -> bool | None:
    """None: ``sub`` holds no projections; else whether it is an attention."""
    if projections(sub) is None:
        return None
    r = read(sub)
    return r is not None and is_attention(sub, r)


def no_attention(model: nn.Module) -> str | None:
    """Why ``model`` has no attention to analyse, in words, where it holds a token mixer that is none (no
    softmax); None where it holds no module with projections at all."""
    mixers = sorted({type(m).__name__ for m in model.modules() if _mixer(m)})
    if not mixers:
        return None
    return f"its token mixers ({', '.join(mixers[:3])}) compute no softmax: state-space or other mixers"


def _mixer(m: nn.Module) -> bool:
    r = read(m)
    return r is not None and not is_attention(m, r)


def skipped(model: nn.Module, attentions: list[str]) -> str | None:
    """A note naming the modules of ``model`` with projections that are no attention (outermost, outside
    the ``attentions`` found), where there are any: a hybrid analyses its attention blocks only."""
    names: list[str] = []
    kinds: set[str] = set()
    for name, m in model.named_modules():
        inside = any(name == a or name.startswith(f"{a}.") for a in [*attentions, *names])
        if name and not inside and _mixer(m):
            names.append(name)
            kinds.add(type(m).__name__)
    if not names:
        return None
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"hybrid: no attention in {shown} ({', '.join(sorted(kinds))}: no softmax), not analysed"
