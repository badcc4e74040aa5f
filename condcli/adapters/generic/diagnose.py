"""Why the generic path finds no attention to read, from what one forward of the model shows (issue 42).

Where no stack of blocks with Q/K/V projections is found, the model is run once on a probe batch (its own
``dummy_inputs``, or images of the size its config names) under a :class:`~torch.overrides.TorchFunctionMode`
that sees every softmax, every product and every ``scaled_dot_product_attention``, with the modules
running at that moment. The refusal's code (:mod:`condcli.reports.refusal`) follows from it:

- a softmax over scores (its input comes from a product of two computed tensors, q·kᵀ, within the module
  call that ran it: through a scale, a bias, a mask or a mix of heads) whose output is a factor of a product
  (P·V), or an SDPA call: attention ran, so its q/k/v are what the path cannot read → ``qkv-unreadable``,
  naming the attention module and what it holds between X and q/k/v (convolutions, norms, experts, low-rank
  projections, parameters used in einsum);
- a softmax whose input is no such product (each token's own score: EfficientViM's ``dt + A``, a
  discretisation step) but whose output multiplied the tokens → ``linear-attention``: weights over tokens
  with no query–key scores, no softmax P (a pooled channel gate of that kind, global context, is none);
- no softmax over keys, but a module named an attention ran → ``linear-attention`` (no P exists);
- neither → ``no-attention``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from condcli.reports.refusal import Refused

ATTENTION_NAME = re.compile(r"attention|attn|selfatt|multihead|\bmha\b|mhsa|\bsa\b|mla$", re.IGNORECASE)
# attention-named modules that gate channels by a pooled vector (squeeze-and-excitation and its kin: SE, ESE,
# ECA, CBAM, gather-excite, global context, split and selective-kernel attention over a few branches): no
# weights over tokens, so no attention in condcli's sense (timm's ``create_attn`` family)
CHANNEL_GATE = re.compile(
    r"^(effective)?se(module|layer|block)?$|squeezeexcit|^c?eca|cbam|gatherexcite|globalcontext|splitattn|"
    r"selectivekernel",
    re.IGNORECASE,
)
SOFTMAX = {torch.softmax, F.softmax, torch.Tensor.softmax, torch.nn.functional.softmax}
PRODUCTS = {
    torch.matmul,
    torch.bmm,
    torch.baddbmm,
    torch.Tensor.baddbmm,
    torch.einsum,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
    torch.Tensor.__rmatmul__,
    torch.Tensor.bmm,
}
SDPA = F.scaled_dot_product_attention
# an elementwise product: a softmax's output multiplied so with a tensor of its own shape scales each entry by
# its own weight and sums nothing (PatchTSMixer's gated attention: a feature gate, no weights over tokens)
ELEMENTWISE = {torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__}
# a submodule name on the way to q, k or v (a norm elsewhere in the attention, e.g. its output's, is not)
QKV_PART = re.compile(
    r"(^|[._])(q|k|v|qk|kv|qkv|query|key|value|projection|proj)([._0-9]|$)|_(q|k|v)([._]|$)"
)


@dataclass
class Seen:
    """What one forward showed: where attention (P·V or SDPA) ran, where a softmax ran that multiplied
    nothing, which attention-named modules ran, and where einsum was called."""

    attention: list[str] = field(default_factory=list)  # module paths where P·V or SDPA ran
    # where a softmax over no query–key scores (no product of two computed tensors) multiplied tensors
    unscored: list[str] = field(default_factory=list)
    lone_softmax: list[str] = field(default_factory=list)  # softmaxes whose output multiplied nothing
    attention_modules: list[str] = field(default_factory=list)  # attention-named modules that ran
    einsum: set[str] = field(default_factory=set)  # module paths where einsum ran
    gates: list[str] = field(default_factory=list)  # softmaxes whose output only gated a tensor of its shape


class _Watch(TorchFunctionMode):
    def __init__(self, stack: list[str], seen: Seen, weights: set[int]) -> None:
        super().__init__()
        self.stack, self.seen = stack, seen
        # id of a softmax output (or what carries it on) → where it ran, and whether it ran over scores
        self.probs: dict[int, tuple[str, bool]] = {}
        self.used: set[str] = set()
        self.gated: set[str] = set()  # where a softmax's output gated a tensor of its own shape
        self.ran: list[str] = []  # where each softmax ran, in order
        self.alive: list[torch.Tensor] = []  # the tensors ``probs`` keys, held so that no id is reused
        self.weights = weights  # ids of the model's parameters and buffers
        # id of a product of two computed tensors (q·kᵀ), or of what it became within the module call that
        # computed it → the depth of that call on the module stack (forgotten when the call returns), and
        # the tensor, held so that no id is reused while it is kept
        self.scores: dict[int, tuple[int, torch.Tensor]] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        where = self.stack[-1] if self.stack else ""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        operands = [t for a in args for t in (a if isinstance(a, list | tuple) else [a])]
        operands = [t for t in operands if isinstance(t, torch.Tensor)]
        if func in SOFTMAX and isinstance(out, torch.Tensor):
            self.probs[id(out)] = (where, bool(tensors) and id(tensors[0]) in self.scores)
            self.ran.append(where)
            self.alive.append(out)
        elif func is SDPA:
            self.seen.attention.append(where)
        elif func in PRODUCTS or func is torch.einsum:
            if func is torch.einsum:
                self.seen.einsum.add(where)
            for t in operands:
                if id(t) in self.probs:
                    ran, scored = self.probs[id(t)]
                    (self.seen.attention if scored else self.seen.unscored).append(ran)
                    self.used.add(ran)
            # the two factors (baddbmm: after the tensor it adds to, given by keyword or not: Bloom's ALiBi)
            factors = [*operands, *(v for v in kwargs.values() if isinstance(v, torch.Tensor))]
            factors = factors[-2:] if func in (torch.baddbmm, torch.Tensor.baddbmm) else factors
            if isinstance(out, torch.Tensor) and len(factors) == 2 and not any(map(self._weight, factors)):
                self._score(out, len(self.stack))
        else:
            if func in ELEMENTWISE and len(tensors) == 2 and tensors[0].shape == tensors[1].shape:
                self.gated.update(self.probs[id(t)][0] for t in tensors if id(t) in self.probs)
            if tensors and id(tensors[0]) in self.probs and isinstance(out, torch.Tensor):
                if out.numel() == tensors[0].numel():  # dropout, a mask, a cast, a view: still P
                    self.probs[id(out)] = self.probs[id(tensors[0])]
                    self.alive.append(out)
            # scores scaled, biased, masked or mixed across heads (talking heads) are still scores
            depth = [self.scores[id(t)][0] for t in operands if id(t) in self.scores]
            if depth:
                for t in out if isinstance(out, list | tuple) else [out]:
                    if isinstance(t, torch.Tensor):
                        self._score(t, min(depth))
        return out

    def _weight(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is one of the model's parameters or buffers, or a view of one (``W.t()``): a
        product with it is a projection, not scores."""
        base: torch.Tensor | None = t
        while base is not None:
            if id(base) in self.weights:
                return True
            base = base._base
        return False

    def _score(self, t: torch.Tensor, depth: int) -> None:
        self.scores[id(t)] = (depth, t)

    def returned(self) -> None:
        """A module call returned: the scores computed within it are forgotten (a block's output that
        carries a product of its own is the next block's X, not scores)."""
        depth = len(self.stack)
        self.scores = {k: v for k, v in self.scores.items() if v[0] <= depth}

    def lone(self) -> list[str]:
        return [w for w in dict.fromkeys(self.ran) if w not in self.used and w not in self.gated]

    def gates(self) -> list[str]:
        return [w for w in dict.fromkeys(self.ran) if w not in self.used and w in self.gated]


def probe_inputs(model: nn.Module) -> dict[str, torch.Tensor] | None:
    """A small batch the model takes: its own ``dummy_inputs`` (HF), or images of its config's size."""
    config = getattr(model, "config", None)
    main = getattr(model, "main_input_name", None)
    if main == "pixel_values" or (config is None and hasattr(model, "pretrained_cfg")):
        size = (
            getattr(config, "image_size", None)
            or (getattr(model, "pretrained_cfg", {}) or {}).get("input_size", (3, 224, 224))[-1]
        )
        size = size[-1] if isinstance(size, list | tuple) else size
        channels = getattr(config, "num_channels", 3) if config is not None else 3
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1, int(channels), int(size), int(size), generator=g)
        return {"pixel_values": x}
    length, channels = getattr(config, "context_length", None), getattr(config, "num_input_channels", None)
    if main == "past_values" and isinstance(length, int) and isinstance(channels, int):  # a time series
        g = torch.Generator().manual_seed(0)
        return {"past_values": torch.randn(1, length, channels, generator=g)}
    dummy = getattr(model, "dummy_inputs", None)
    if isinstance(dummy, dict) and dummy:
        return {k: v for k, v in dummy.items() if isinstance(v, torch.Tensor)}
    return None


def observe(model: nn.Module, inputs: dict[str, torch.Tensor]) -> Seen | str:
    """Run ``model`` once on ``inputs`` and record what :class:`Seen` holds; where it cannot run, what it
    raised, in words."""
    names = {id(m): n for n, m in model.named_modules()}
    stack: list[str] = []
    seen = Seen()

    def enter(module: nn.Module, args: Any) -> None:
        name = names.get(id(module))
        if name is not None:
            stack.append(name)
            named = ATTENTION_NAME.search(type(module).__name__) or ATTENTION_NAME.search(
                name.rsplit(".", 1)[-1]
            )
            if named and not type(module).__module__.startswith("torch.nn"):  # not a Dropout called attn_drop
                seen.attention_modules.append(name)

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        if id(module) in names and stack:
            stack.pop()
            watch.returned()

    handles = [nn.modules.module.register_module_forward_pre_hook(enter)]
    handles.append(nn.modules.module.register_module_forward_hook(leave))
    weights = {id(t) for t in (*model.parameters(), *model.buffers())}
    watch = _Watch(stack, seen, weights)
    try:
        with torch.no_grad(), watch:
            if set(inputs) == {"pixel_values"} and getattr(model, "config", None) is None:
                model(inputs["pixel_values"])
            else:
                model(**inputs)
    except Exception as e:  # the model's own code (a tiny config's router, a missing second input)
        said = " ".join(str(e).split())[:200]
        return f"{type(e).__name__}: {said}" if said else type(e).__name__
    finally:
        for h in handles:
            h.remove()
    seen.lone_softmax, seen.gates = watch.lone(), watch.gates()
    return seen


def _between(model: nn.Module, path: str, seen: Seen) -> str:
    """What an attention module holds between X and q/k/v, in words."""
    attn = model.get_submodule(path) if path else model
    found: list[str] = []
    kinds = [(n, type(m).__name__) for n, m in attn.named_modules() if n]
    convs = sorted({c for _, c in kinds if "conv" in c.lower()})
    if convs:
        found.append(f"convolutions ({', '.join(convs[:3])})")
    norms = sorted({c for n, c in kinds if "norm" in c.lower() and QKV_PART.search(n.lower())})
    if norms:
        found.append(f"norms ({', '.join(norms[:3])})")
    if any("expert" in n.lower() or "expert" in c.lower() or "router" in n.lower() for n, c in kinds):
        found.append("router-chosen experts")
    latent = [
        n for n, _ in kinds if re.search(r"lora|_a_proj|_b_proj|kv_a|q_a|compress|down_proj", n.lower())
    ]
    if latent:  # each path in the order it runs (MLA: q_a_proj → q_a_layernorm → q_b_proj; kv_a_… → kv_b_…)
        paths = {p: [n for n in latent if n.lower().startswith(p)] for p in ("q", "kv")}
        chains = [" → ".join(c) for c in paths.values() if c]
        rest = [n for n in latent if not any(n in c for c in paths.values())]
        found.append(f"low-rank (latent) projections ({'; '.join(chains + rest[:3])})")
    params = [n for n, p in attn.named_parameters(recurse=False) if p.ndim >= 2]
    if params and path in seen.einsum:
        found.append(f"parameters used in einsum ({', '.join(params[:4])})")
    elif params:
        found.append(f"parameters of its own ({', '.join(params[:4])})")
    lists = [n for n, m in attn.named_children() if isinstance(m, nn.ModuleList)]
    if lists:
        found.append(f"per-head lists of projections ({', '.join(lists[:2])})")
    if not found:
        children = ", ".join(f"{n} ({type(m).__name__})" for n, m in list(attn.named_children())[:5])
        found.append(f"projections not named or shaped as Q/K/V ({children or 'no submodules'})")
    return "; ".join(found)


def _only_gates(path: str, seen: Seen) -> bool:
    """Whether the softmaxes run inside the module at ``path`` all gated a tensor of their own shape (and
    there were some): a feature gate, not attention."""

    def inside(w: str) -> bool:
        return w == path or w.startswith(f"{path}.") or not path

    return any(inside(w) for w in seen.gates) and not any(inside(w) for w in seen.lone_softmax)


def _where(path: str) -> str:
    return path or "the model itself"


def refusal(model: nn.Module, static: str | None = None) -> Refused:
    """The refusal for a model whose attention the generic path cannot read, from one probe forward.

    ``static``: what the path found without running it (mixers that compute no softmax), said beside."""
    name = type(model).__name__
    hint = (
        "describe its embedding, blocks and attention in a TOML file passed as `adapter` "
        "(docs/guides/your-own-model.md; the supported models: docs/commands/models.md), or open an issue"
    )
    inputs = probe_inputs(model)
    seen = observe(model, inputs) if inputs is not None else "its inputs are not known to condcli"
    batch = ", ".join(f"{k} {tuple(v.shape)}" for k, v in inputs.items()) if inputs else ""
    if isinstance(seen, str):
        why = f"run on a probe batch of {batch}, it raised {seen}" if inputs else seen
        return _unrun(model, static, hint, why)
    if seen.attention:
        path = _innermost_attention(seen.attention, seen.attention_modules)
        return Refused(
            "qkv-unreadable",
            f"attention ran in {_where(path)} ({type(model.get_submodule(path)).__name__ if path else name}: "
            f"a softmax over the keys multiplied the values on a probe batch of {batch}), but its Q/K/V "
            f"are not the projections condcli reads: between X and q/k/v stand {_between(model, path, seen)}",
            hint,
        )
    if seen.unscored:
        weighing = _unscored(model, seen, batch)
        if isinstance(weighing, Refused):
            return weighing
        static = (f"{static}; " if static else "") + weighing
    ran = list(dict.fromkeys(seen.attention_modules))
    gates = sorted({type(model.get_submodule(p)).__name__ for p in ran} if ran else set())
    if ran and all(CHANNEL_GATE.search(c) for c in gates):
        static = (f"{static}; " if static else "") + (
            f"its attention-named modules ({', '.join(gates[:3])}) gate channels by a pooled vector "
            "(squeeze-and-excitation and its kin), with no weights over tokens"
        )
        ran = []
    gating = [p for p in ran if _only_gates(p, seen)]
    if ran and len(gating) == len(ran):
        classes = sorted({type(model.get_submodule(p)).__name__ for p in gating})
        static = (f"{static}; " if static else "") + (
            f"its attention-named modules ({', '.join(classes[:3])}) gate their input by a softmax "
            "multiplied entry by entry into it (a feature gate), with no weights over tokens"
        )
        ran = []
    if ran:
        classes = sorted({type(model.get_submodule(p)).__name__ for p in ran})
        lone = (
            f"; the softmax it computes (in {seen.lone_softmax[0]}) multiplies no values"
            if seen.lone_softmax
            else ""
        )
        return Refused(
            "linear-attention",
            f"linear attention: its attention modules ({', '.join(classes[:3])}) ran on a probe batch of "
            f"{batch} and computed no softmax over the keys{lone}: no softmax P exists",
            "condcli analyses softmax attention",
        )
    mixers = f"; {static}" if static else ""
    return Refused(
        "no-attention",
        f"condcli found no stack of blocks with Q/K/V projections in {name}: no attention in any block (on "
        f"a probe batch of {batch} no softmax over keys was computed and no attention module ran{mixers})",
        f"condcli analyses softmax attention (a hybrid's attention blocks are analysed, the others named); "
        f"if {name} does hold attention, {hint}",
    )


def _unscored(model: nn.Module, seen: Seen, batch: str) -> Refused | str:
    """A softmax over no query–key scores whose weights multiplied tensors: ``linear-attention`` (weights
    over the tokens, from each token's own score, multiply them, and no softmax P over query–key scores
    exists); where every such softmax runs inside a pooled channel gate (global context), the words that say
    so beside a ``no-attention``."""
    holders = [_innermost_attention([w], seen.attention_modules) for w in dict.fromkeys(seen.unscored)]
    classes = [type(model.get_submodule(p)).__name__ if p else type(model).__name__ for p in holders]
    if all(CHANNEL_GATE.search(c) for c in classes):
        return (
            f"its softmax in {', '.join(sorted(set(classes))[:3])} weighs the tokens only to pool them into "
            "one vector that gates channels (global context): no weights over tokens per query"
        )
    path, cls = holders[0], classes[0]
    return Refused(
        "linear-attention",
        f"no softmax attention: on a probe batch of {batch} a softmax ran in {_where(path)} ({cls}) over "
        "scores that are no query–key product (no product of two computed tensors, as q·kᵀ is, led to its "
        "input), and the weights it gave multiplied the tokens: weights over tokens without query–key "
        "scores, so no softmax P exists",
        "condcli analyses softmax attention",
    )


def _unrun(model: nn.Module, static: str | None, hint: str, why: str) -> Refused:
    """The refusal where no probe forward can be run (``why``: its inputs are unknown, or the model raised
    on them): from its modules alone, an attention-named module or a softmax module is attention, else there
    is none."""
    name = type(model).__name__
    held = [
        f"{n} ({type(m).__name__})"
        for n, m in model.named_modules()
        if n
        and not type(m).__module__.startswith("torch.nn")
        and (ATTENTION_NAME.search(type(m).__name__) or ATTENTION_NAME.search(n.rsplit(".", 1)[-1]))
    ]
    softmax = [n for n, m in model.named_modules() if isinstance(m, nn.Softmax | nn.MultiheadAttention)]
    if held or softmax:
        where = (held or softmax)[0]
        path = where.split(" (")[0]
        return Refused(
            "qkv-unreadable",
            f"condcli found no stack of blocks with Q/K/V projections in {name}, though it holds attention "
            f"({where}); no probe forward could be run to watch it ({why}), and it holds "
            f"{_between(model, path, Seen())}",
            hint,
        )
    mixers = f"; {static}" if static else ""
    return Refused(
        "no-attention",
        f"condcli found no stack of blocks with Q/K/V projections in {name}: no attention in any block (no "
        f"module named an attention, no softmax module{mixers})",
        f"condcli analyses softmax attention (a hybrid's attention blocks are analysed, the others named); "
        f"if {name} does hold attention, {hint}",
    )


def _innermost_attention(where: list[str], attention_modules: list[str]) -> str:
    """The attention-named module nearest the first place attention ran (that place where none holds it)."""
    first = where[0]
    holders = [m for m in attention_modules if first == m or first.startswith(f"{m}.")]
    return max(holders, key=len) if holders else first


Diagnose = Callable[[nn.Module, str | None], Refused]
