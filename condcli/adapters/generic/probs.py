"""P as an HF attention module returns it beside its output, and when it must be asked for.

- Attentions whose ``forward`` takes ``output_attentions`` (BERT-era code: ``(context, probs) if
  output_attentions else (context,)``) return their weights only on request: the model is then run with
  ``output_attentions=True`` for the capture (and ``output_hidden_states=True`` where its forward names it:
  MaskFormer-Swin's encoder reads the weights out of what its stages return only with hidden states). This
  is read from the module's own signature, for every family.
- Attentions that return no weights in any call (MiniCPM's vision towers: ``return attn_output, None``,
  whatever ``output_attentions`` says) while their code computes a softmax over the keys (in
  ``eager_attention_forward``) have that softmax read inside their call under eager attention, by a
  :class:`~condcli.adapters.softmax_tap.SoftmaxTap` entered and left by hooks that live only for the forward,
  and put where the weights would be: the capture then takes and proves it as it does a returned P.
- A returned P is the last 4-D tensor of the module's output that is a probability matrix over the keys.
  Where the attention adds a learned sink to the keys and drops its column after the softmax (GPT-OSS
  ``sinks``), its rows sum to less than 1: it is still the matrix that multiplies V, and it is taken as such
  where the module keeps a sink. Anything else that is not a probability matrix is refused, naming the layer.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import torch
from torch import nn

from condcli.adapters.generic.layouts import Grouping, grouped
from condcli.adapters.softmax_tap import SoftmaxTap, computes_softmax, unobservable
from condcli.reports.refusal import Refused

Rows = Literal["one", "at most one"]  # what P's rows sum to: a softmax over the keys, or with a sink dropped


def weights_on_request(attn: nn.Module) -> bool:
    """Whether ``attn`` returns its attention weights only when ``output_attentions`` reaches it: its
    ``forward`` takes that argument and branches on it (``if output_attentions``, ``… if output_attentions
    else …``). One that ignores it or only passes it on (StableLM, Whisper) returns its weights anyway under
    eager attention: asking would only install the library's own recording hooks."""
    forward = type(attn).forward
    try:
        if "output_attentions" not in inspect.signature(forward).parameters:
            return False
        tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
    except (TypeError, ValueError, OSError, SyntaxError):
        return False
    if _branches(tree):
        return True
    # passed on to a method of its own that branches on it (OpenAI GPT's self._attn(..., output_attentions))
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        if not (isinstance(call.func.value, ast.Name) and call.func.value.id == "self"):
            continue
        passed = [*call.args, *(k.value for k in call.keywords)]
        if not any(isinstance(a, ast.Name) and a.id == "output_attentions" for a in passed):
            continue
        method = getattr(type(attn), call.func.attr, None)
        if callable(method) and not isinstance(method, type) and not isinstance(method, nn.Module):
            try:
                if _branches(ast.parse(textwrap.dedent(inspect.getsource(method)))):
                    return True
            except (TypeError, ValueError, OSError, SyntaxError):
                continue
    return False


def _branches(tree: ast.AST) -> bool:
    """Whether code branches on ``output_attentions`` (``if output_attentions``, ``… if … else …``)."""
    return any(
        isinstance(n, ast.If | ast.IfExp)
        and any(isinstance(t, ast.Name) and t.id == "output_attentions" for t in ast.walk(n.test))
        for n in ast.walk(tree)
    )


def returns_weights(attn: nn.Module) -> bool:
    """Whether ``attn``'s ``forward`` can return its attention weights beside its output: it takes
    ``output_attentions``, or its return annotation is a tuple, or it returns a tuple literal. One that
    returns its output alone (MobileViT's ``-> torch.Tensor``) computes P as a function inside its call,
    where the softmax tap observes it instead."""
    forward = type(attn).forward
    try:
        signature = inspect.signature(forward)
        if "output_attentions" in signature.parameters:
            return True
        annotation = str(signature.return_annotation).lower()
        if "tuple" in annotation:
            return True
        tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
    except (TypeError, ValueError, OSError, SyntaxError):
        return True  # nothing to read: ask for the weights, and refuse by name if none come
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) for n in ast.walk(tree))


def eager_twin(attn: nn.Module) -> type | None:
    """The eager class an attention built for SDPA derives from (``XSdpaSelfAttention(XSelfAttention)``,
    chosen once when the model is built, so switching the model to eager does not reach it), or None."""
    cls = type(attn)
    base = cls.__bases__[0] if cls.__bases__ else object
    if "Sdpa" in cls.__name__ and base.__name__ == cls.__name__.replace("Sdpa", ""):
        return base
    return None


@contextmanager
def as_eager(attns: Sequence[nn.Module]) -> Iterator[None]:
    """Run each SDPA-built attention as its eager twin (which computes and returns P), restored after."""
    saved = [(m, type(m)) for m in attns]
    try:
        for m, _ in saved:
            m.__class__ = eager_twin(m) or type(m)
        yield
    finally:
        for m, cls in saved:
            m.__class__ = cls


def hf_forward(model: nn.Module, attns: Sequence[nn.Module]) -> Callable[[dict[str, Any]], Any] | None:
    """How the generic path runs an HF model so that P is returned where it is captured: with
    ``output_attentions=True`` where an attention returns its weights only on request, and SDPA-built
    attentions run as their eager twins while the model is switched to eager attention (None: as it is)."""
    requesting = [a for a in attns if weights_on_request(a)]
    request = bool(requesting)
    twins = [a for a in attns if eager_twin(a) is not None]
    blind = [a for a in dict.fromkeys(attns) if returns_none(a)]
    if not request and not twins and not blind:
        return None
    configs = _inner_configs(model, requesting)
    extra = {"output_attentions": True} if request else {}
    if request and _names(model, "output_hidden_states"):
        # hidden states asked for beside the weights: a family may read the weights out of what its stages
        # return only with hidden states (MaskFormer-Swin's encoder indexes them, None without); they are
        # no larger than the weights kept beside them
        extra["output_hidden_states"] = True

    def run(inputs: dict[str, Any]) -> Any:
        eager = getattr(getattr(model, "config", None), "_attn_implementation", None) == "eager"
        with as_eager(twins if eager else ()), _asking(configs), read_inside(blind if eager else ()):
            return model(**inputs, **extra)

    return run


def returns_none(attn: nn.Module) -> bool:
    """Whether ``attn`` returns no attention weights in any call although its code computes a softmax over
    the keys: every ``return`` of its ``forward`` is a tuple whose entries after the output are literal
    ``None`` (MiniCPM's vision attention: ``return attn_output, None``, whatever ``output_attentions`` says,
    its P computed inside ``eager_attention_forward`` and dropped). A module that can return its weights is
    never one: the weights it returns are the ones taken."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(type(attn).forward)))
    except (TypeError, ValueError, OSError, SyntaxError):
        return False
    returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return)]
    if not returns or not all(_none_beside(v) for v in returns):
        return False
    return computes_softmax(attn) and unobservable(attn) is None


def _none_beside(value: ast.expr | None) -> bool:
    """Whether a returned value is a tuple literal ``(output, None, …)``: only None beside the output."""
    return (
        isinstance(value, ast.Tuple)
        and len(value.elts) >= 2
        and all(isinstance(e, ast.Constant) and e.value is None for e in value.elts[1:])
    )


@contextmanager
def read_inside(attns: Sequence[nn.Module]) -> Iterator[None]:
    """Each module of ``attns`` (:func:`returns_none`) run inside a fresh :class:`SoftmaxTap` for each of its
    calls: entered by a pre-hook, left by a forward hook placed before every other, which puts the one softmax
    over the keys the call computed where its output holds None for the weights (a call that computed several,
    one per sequence packed into it, keeps its None). The taps and hooks live only inside this block (the
    taps left, innermost first, where the forward raised inside a call)."""
    handles: list[Any] = []
    entered: list[SoftmaxTap] = []  # entered and not yet left: only where the forward raised inside a call

    def enter(module: nn.Module, args: Any) -> None:
        tap = SoftmaxTap()
        tap.__enter__()  # type: ignore[no-untyped-call]
        entered.append(tap)

    def leave(module: nn.Module, args: Any, output: Any) -> Any:
        tap = entered.pop()
        tap.__exit__(None, None, None)  # type: ignore[no-untyped-call]
        if not (isinstance(output, tuple) and len(output) >= 2 and all(o is None for o in output[1:])):
            return None  # not the shape it was read to return: left as it is
        if tap.count != 1:
            # none (fused), or one per sequence packed into the call (MiniCPM's merger: one per 2×2 window),
            # no one matrix over the tokens' keys: left None, refused by name where the layer is chosen
            return None
        return (output[0], tap.probs, *output[2:])

    try:
        for m in attns:
            handles.append(m.register_forward_pre_hook(enter))
            handles.append(m.register_forward_hook(leave, prepend=True))
        yield
    finally:
        while entered:
            entered.pop().__exit__(None, None, None)  # type: ignore[no-untyped-call]
        for h in handles:
            h.remove()


def _inner_configs(model: nn.Module, attns: Sequence[nn.Module]) -> list[Any]:
    """The configs of the sub-models, between ``model`` and an attention in ``attns``, that read
    ``output_attentions`` from their own config where their caller passes none (MaskFormer's pixel-level
    module calls its Swin backbone as ``self.encoder(pixel_values)``: the flag given to the model never
    reaches the backbone's attentions)."""
    wanted = {id(a) for a in attns}
    holders = [n for n, m in model.named_modules() if id(m) in wanted]
    top = getattr(model, "config", None)
    configs: dict[int, Any] = {}
    for name, m in model.named_modules():
        config = getattr(m, "config", None)
        if not name or config is None or config is top or not hasattr(config, "output_attentions"):
            continue
        if any(h.startswith(f"{name}.") for h in holders):
            configs.setdefault(id(config), config)
    return list(configs.values())


@contextmanager
def _asking(configs: Sequence[Any]) -> Iterator[None]:
    """Each config in ``configs`` whose attention runs eager (the capture's: the only one that returns
    weights) set to return attention weights, restored after."""
    eager = [c for c in configs if getattr(c, "_attn_implementation", "eager") == "eager"]
    saved = [(c, c.output_attentions) for c in eager]
    try:
        for c, _ in saved:
            c.output_attentions = True
        yield
    finally:
        for c, was in saved:
            c.output_attentions = was


def _names(model: nn.Module, parameter: str) -> bool:
    """Whether ``model.forward`` names ``parameter`` among its own (not only in ``**kwargs``)."""
    try:
        return parameter in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def sink(attn: nn.Module) -> str | None:
    """The name of ``attn``'s learned attention sink (a parameter with 'sink' in its name), if it keeps one:
    a softmax over the keys and the sink, whose column is dropped (the rows of P sum to less than 1)."""
    return next((n for n, _ in attn.named_parameters(recurse=False) if "sink" in n.lower()), None)


def _probabilities(t: torch.Tensor) -> bool:
    """Whether ``t`` is a non-empty floating tensor with entries in [0, 1] (within 64 eps above)."""
    if not t.is_floating_point() or t.numel() == 0:
        return False
    low, high = torch.aminmax(t.detach())
    return bool(low >= 0 and high <= 1 + 64 * torch.finfo(t.dtype).eps)


def _sums64(t: torch.Tensor) -> torch.Tensor:
    """Each row's sum accumulated in float64, ≤ 32 MiB of P at a time."""
    mats = t.flatten(0, -3)
    step = max(1, 2**22 // max(t.shape[-2] * t.shape[-1], 1))
    return torch.cat([m.sum(-1, dtype=torch.float64) for m in torch.split(mats, step)])


def stochastic(t: torch.Tensor, rows: Rows = "one") -> bool:
    """Entries in [0, 1] and rows summing to 1 (``at most one``: to no more than 1), within the rounding of
    the dtype P was computed in. A float32 P (this runs on every attention call) is summed in float32 first,
    a twentieth of the float64 sum's time at 2,048 tokens: its rows of k non-negative entries are within
    γ_k of their sums (Higham Thm 4.1, any order), so the verdict is settled there unless a sum lies within
    that of the tolerance, and then by the float64 sum, as before."""
    if not _probabilities(t):
        return False
    t = t.detach()
    k = t.shape[-1]
    tol = 64 * torch.finfo(t.dtype).eps * k
    if t.dtype == torch.float32:
        u = torch.finfo(torch.float32).eps / 2
        gamma = k * u / (1 - k * u)
        sums = t.sum(-1).to(torch.float64)
        err = gamma * sums / (1 - gamma)  # |ŝ − s| ≤ γ_k·s and s ≤ ŝ/(1 − γ_k)
        off = (sums - 1).abs() if rows == "one" else sums - 1
        if bool((off + err <= tol).all()):
            return True
        if bool((off - err > tol).any()):
            return False
    sums = _sums64(t)
    return bool(((sums - 1).abs() <= tol).all() if rows == "one" else (sums <= 1 + tol).all())


def _layout(t: torch.Tensor, batch: int, heads: int, grouping: Grouping) -> torch.Tensor | None:
    """(B·G, H, q, k) → (B, G, H, q, k), or (B, H, G, q, k) (Hiera's mask units) → the same, or 3-D
    (B·H, q, k) → (B, 1, H, q, k) (no batch or group axis; H × q × k for one sample), or 3-D per window
    (B·G·H, q, k) → (B, G, H, q, k) (SAM's windowed attention folds its heads into the windows' batch
    axis, heads innermost, as the 3-D and 4-D layouts above hold them); None where the layout is not one
    of these (or cannot be told apart: as many groups as heads)."""
    if t.ndim == 3 and t.shape[0] == batch * heads and t.shape[-1] > 1:  # (B·H, q, k): no group axis
        return t.reshape(batch, 1, heads, *t.shape[-2:])
    if t.ndim == 3 and t.shape[0] % (batch * heads) == 0 and t.shape[-1] > 1:  # (B·G·H, q, k): windows
        return grouped(t.reshape(-1, heads, *t.shape[-2:]), batch, grouping)
    if t.ndim == 4 and t.shape[0] % batch == 0:
        return grouped(t, batch, grouping)
    if t.ndim == 5 and t.shape[0] == batch and (t.shape[1] == heads) != (t.shape[2] == heads):
        return t if t.shape[2] == heads else t.transpose(1, 2)
    return None


def returned_probs(
    layer: str,
    rows: Rows,
    grouping: Grouping,
    heads: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    output: Any,
    batch: int,
) -> torch.Tensor:
    """The attention weights an HF attention module returns beside its output, (B·G, H, q, k) (the images
    outermost or innermost on the leading axis) or (B, H, G, q, k) → (B, G, H, q, k).

    Modules return other 4-D tensors too (T5: its position bias before the weights), so the one taken is
    the last that is a probability matrix over the keys. Where the call returned none, the capture stops
    with one line naming ``layer``: a P that is missing is never reported as absent without a word.
    """
    if isinstance(output, tuple | list) and output and isinstance(output[0], tuple | list):
        output = output[0]  # I-BERT: ((context, weights), (their scaling factors))
    found = tuple(output[1:]) if isinstance(output, tuple | list) else ()  # OpenAI GPT returns a list
    four = [t for t in found if isinstance(t, torch.Tensor) and t.ndim in (3, 4, 5)]
    # weights returned in named parts (Pegasus-X: {"global": …, "local": …}, blocked global + local attention)
    parts = {k: v for d in found if isinstance(d, dict) for k, v in d.items() if isinstance(v, torch.Tensor)}
    x = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("hidden_states")
    n = int(x.shape[-2]) if isinstance(x, torch.Tensor) and x.ndim == 3 else None
    # weights laid (B, n, H, w): for each of the n queries, w keys around it (Longformer's band), never P
    band = [
        t
        for t in four
        if t.ndim == 4 and n is not None and n != heads and t.shape[1] == n and t.shape[-1] != n
    ]
    for t in reversed([t for t in four if not any(t is b for b in band)]):
        p = _layout(t, batch, heads, grouping)
        if p is not None and stochastic(t, rows):
            return p
    if band:
        why = _band(band[-1], n)
    elif parts:
        shown = ", ".join(f"{k} {tuple(v.shape)}" for k, v in parts.items())
        why = (
            f"it returned its attention weights in parts ({shown}), each over its own block of keys, not one "
            f"matrix over the tokens' keys{_beside(four)}"
        )
    elif odd := [
        t for t in four if stochastic(t, "at most one") and _layout(t, batch, heads, grouping) is None
    ]:
        why = (
            f"it returned attention weights of shape {tuple(odd[-1].shape)}, a layout condcli cannot "
            f"tell apart ({heads} heads)"
        )
    elif any(stochastic(t, "at most one") for t in four):
        why = (
            "it returned attention weights whose rows sum to less than 1 (a dropped sink column or a gate?), "
            "and condcli found no sink in the module to say what they are"
        )
    elif four:  # ProphetNet returns its scores before the softmax as its "attention weights"
        shapes = ", ".join(str(tuple(t.shape)) for t in four)
        why = (
            f"what it returned beside its output ({shapes}) is no probability matrix over the keys (entries"
            " outside [0, 1] or rows that do not sum to 1: scores before the softmax?)"
        )
    else:
        why = "it returned no attention weights under eager attention, even with output_attentions"
    raise Refused(
        "p-unobservable",
        f"layer {layer}: P cannot be observed: {why}",
        "run 'condcli inspect' to see what was found; describe the attention in a TOML file passed as "
        "`adapter` (docs/guides/your-own-model.md)",
    )


def _beside(four: list[torch.Tensor]) -> str:
    """What else it returned that is no probability matrix (Pegasus-X: its global tokens' hidden states)."""
    other = [str(tuple(t.shape)) for t in four if not stochastic(t, "at most one")]
    return f"; beside them {', '.join(other)}, no probability matrix (a hidden state?)" if other else ""


def _band(t: torch.Tensor, n: int | None) -> str:
    """Why weights of shape (B, n, H, w) are no P: a band of local or chunked attention."""
    return (
        f"it returned attention weights of shape {tuple(t.shape)}: for each of the {n} queries, "
        f"{int(t.shape[-1])} keys around it (local or chunked attention returned as a band), not a matrix "
        f"over the {n} tokens' keys"
    )
