"""The generic path proves its reading of Q/K/V on the model's first batch (DESIGN: no number from a guess).

Each generic layer's attention call is watched from inside (:mod:`condcli.adapters.generic.watch`, a
``TorchFunctionMode`` as :mod:`condcli.adapters.softmax_tap` watches softmax): the q, k and v it consumes are
the operands of its score product Q·Kᵀ and of P·V (``@``/``matmul``, ``bmm``, ``baddbmm``, ``einsum``) or
the arguments of ``F.scaled_dot_product_attention``. The inferred projections of A_l (A_l W + b per head,
float64, from the layer's own :class:`~condcli.adapters.base.HeadWeights`), after the attention's q/k norms
(children named ``q_norm``, ``k_layernorm``, …) and the family's rotation (RoPE) where known, must equal them:

- q equals a left operand of a product (or SDPA's query), k the transpose of a right one (SDPA's key), v a
  right one (SDPA's value), each up to one positive scale (a scale folded into q, e.g. q·d_h^-½) and within
  the capture dtype's rounding: relative residual ≤ √eps(dtype) (the rounding of a d-term product in that
  dtype is ≈ √d·eps, far below it; a wrong split leaves a residual of order 1);
- in the module's own token order, else as a set of rows (attentions that regroup tokens inside their call);
- where the model rotates or normalises q and k row by row in a way the path does not reproduce, q and k
  are proven by their row directions or, where those vary enough to tell rows apart, their row norms;
- queries taken from some of A_l's tokens only (a class token, subsampled tokens) as a subset of the rows;
- where q and k meet in no product the watch sees, by P: the softmax the call computed must be
  softmax(s·q kᵀ + mask) of the inferred q and k (:func:`~condcli.adapters.generic.match.probs_match`).

A layer is verified where q, k and v are all proven; refused where the reading is contradicted (an inferred
role equals what the model uses as another role, or a fused projection's split matches nothing the
attention consumes); unverified otherwise (nothing to compare, or transforms the path cannot follow).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from condcli.adapters.base import Adapter, HeadWeights, LayerSpec
from condcli.adapters.generic.attn import read
from condcli.adapters.generic.heads import PARAMS
from condcli.adapters.generic.match import matches, probs_match, subset, tolerance
from condcli.adapters.generic.watch import ROLES as WATCH_ROLES
from condcli.adapters.generic.watch import Watch
from condcli.reports.refusal import coded

Tensor = torch.Tensor
ROLES = WATCH_ROLES
NORM_NAMES = {
    "q": re.compile(r"^(q|query)_?(norm|layernorm|layer_norm|ln)$|^norm_?q$"),
    "k": re.compile(r"^(k|key)_?(norm|layernorm|layer_norm|ln)$|^norm_?k$"),
}


@dataclass
class Proof:
    """What the first batch proved of one layer's reading."""

    proven: dict[str, str] = field(default_factory=dict)  # role → how ("exactly", "as rows", "by row norms")
    contradicted: list[str] = field(default_factory=list)  # what the model's call contradicts
    seen: bool = False  # the call consumed tensors the inferred ones could be compared with
    elsewhere: tuple[str, ...] = ()  # roles not computed from A_l's tokens: not compared
    chosen: Callable[[], HeadWeights] | None = None  # the alternative reading proven in place of the first

    @property
    def verified(self) -> bool:
        return not self.contradicted and all(r in self.proven for r in ROLES)


def _norms(attn: nn.Module) -> dict[str, nn.Module]:
    """The attention's q and k norms (Qwen3, OLMo2, Gemma3, Persimmon, …), by their names."""
    out: dict[str, nn.Module] = {}
    for name, child in attn.named_children():
        for role, pattern in NORM_NAMES.items():
            if pattern.match(name.lower()):
                out[role] = child
    return out


def _apply_norm(norm: nn.Module, x: Tensor) -> Tensor | None:
    """A q/k norm applied as the attention applies it: over each head (d_h) or the whole width (H·d_h)."""
    w = next(iter(norm.parameters()), None)
    dtype = w.dtype if w is not None else torch.float32
    width = int(w.shape[-1]) if w is not None else x.shape[-1]
    try:
        with torch.no_grad():
            if width == x.shape[-1]:
                y: Tensor = norm(x.to(dtype))
                return y.to(torch.float64)
            if width == x.shape[-3] * x.shape[-1]:  # (B, G, H, n, d_h) → (B, G, n, H·d_h)
                flat: Tensor = norm(x.transpose(-2, -3).flatten(-2).to(dtype))
                heads, width = int(x.shape[-3]), int(x.shape[-1])
                per_head = flat.to(torch.float64).reshape(*flat.shape[:-1], heads, width)
                return per_head.transpose(-2, -3)
    except (RuntimeError, ValueError, TypeError):
        return None
    return None


def inferred(spec: LayerSpec, attn: nn.Module, a: Tensor) -> dict[str, Tensor]:
    """q, k, v (B, G, heads, n, d_h), float64, as the layer's reading says the attention computes them from
    A_l (B, G, n, c): projected, then the q/k norms and the rotation the path knows."""
    w: HeadWeights = spec.weights()
    x = a.to(torch.float64)
    out = {}
    for role, wr, br in (("q", w.wq, w.bq), ("k", w.wk, w.bk), ("v", w.wv, w.bv)):
        y = torch.einsum("bgnc,hcd->bghnd", x, wr.to(x.device))
        out[role] = y if br is None else y + br.to(x.device)[:, None, :]
    for role, norm in _norms(attn).items():
        normed = _apply_norm(norm, out[role])
        if normed is not None:
            out[role] = normed
    if spec.rotation is not None:  # as the analysis rotates them: (groups, heads, n, d_h)
        q, k = spec.rotation(out["q"].flatten(0, 1), out["k"].flatten(0, 1))
        out["q"], out["k"] = q.reshape(out["q"].shape), k.reshape(out["k"].shape)
    return out


def judge(site: Site, a: Tensor, watch: Watch) -> Proof:
    """Compare the layer's inferred q, k, v with what its attention call consumed (one call)."""
    proof = Proof(elsewhere=site.elsewhere)
    tol = tolerance(a.dtype)
    ours = inferred(site.spec, site.attn, a)
    w = site.spec.weights()
    mine: dict[str, list[Tensor]] = {r: [ours[r]] for r in ROLES}
    if w.kv_heads != w.heads:  # the module may repeat each KV head for its query heads (repeat_kv)
        index = w.kv_index().to(a.device)
        for r in ("k", "v"):
            mine[r].append(ours[r][:, :, index])
    seen = watch.seen
    if site.channels:  # P (d_h × d_h) = q kᵀ over tokens laid (d_h, n): q a left operand transposed, k a
        # right one as it is, v a right one transposed (P·V with V (d_h, n))
        seen = {"q": [t.transpose(-1, -2) for t in seen["q"]], "k": seen["v"], "v": seen["k"]}
    proof.seen = any(seen[r] for r in ROLES)
    for role in ROLES:
        how = _found(seen[role], mine[role], tol, per_row=False, grouped=role != "q")
        if how is None and role in ("q", "k"):
            how = _found(seen[role], mine[role], tol, per_row=True)
        if how is None and role in site.elsewhere:  # queries of the class token or subsampled tokens
            how = next((h for t in seen[role] for x in mine[role] if (h := subset(t, x, tol))), None)
        if how is not None:
            proof.proven[role] = how
    if watch.probs is not None and not {"q", "k"} <= proof.proven.keys():  # P recomputed from q and k
        if any(probs_match(watch.probs, ours["q"], k, tol) for k in mine["k"]):
            for role in ("q", "k"):
                proof.proven.setdefault(role, "by P recomputed")
    # its keys in larger groups than A_l's: P mixes tokens of what was read as separate groups or samples
    wide = {r: g for r in ("k", "v") if r not in proof.proven and (g := _wider(seen[r], mine[r], tol))}
    for (theirs, ours_n), roles in {g: [r for r in wide if wide[r] == g] for g in wide.values()}.items():
        proof.contradicted.append(
            f"its attention reads {', '.join(r.upper() for r in roles)} in groups of {theirs} tokens where "
            f"A_l was read in groups of {ours_n}: the tokens are laid out otherwise than read (sequence "
            "first?)"
        )
    for role in ROLES:  # a role proven nowhere but equal to what the call uses as another: a swap
        if role in proof.proven:
            continue
        for other in ROLES:
            if other != role and any(
                matches(t, x, tol) == "exactly" for t in seen[other] for x in mine[role]
            ):
                proof.contradicted.append(f"the inferred {role.upper()} is what it uses as {other.upper()}")
    comparable = [r for r in ROLES if r not in site.elsewhere]
    if site.fused and proof.seen and comparable and not any(r in proof.proven for r in comparable):
        proof.contradicted.append(
            "the split of its fused projection gives no Q, K or V its attention consumes"
        )
    return proof


def judge_all(site: Site, a: Tensor, watch: Watch) -> Proof:
    """:func:`judge` of the layer's reading, else of the first of its alternatives that is proven (the
    proof then carries it in ``chosen``)."""
    try:
        proof = judge(site, a, watch)
    except (RuntimeError, ValueError):  # the reading cannot even be applied to A_l: nothing proven
        proof = Proof(seen=True, elsewhere=site.elsewhere)
    if proof.verified:
        return proof
    for alternative in site.spec.alternatives:
        try:
            other = judge(replace(site, spec=replace(site.spec, weights=alternative)), a, watch)
        except (RuntimeError, ValueError):  # the weights do not split or apply that way
            continue
        if other.verified:
            other.chosen = alternative
            return other
    return proof


def _found(
    seen: list[Tensor], mine: list[Tensor], tol: float, per_row: bool, grouped: bool = False
) -> str | None:
    """How one of ``seen`` equals one of ``mine`` (see :func:`matches`); None where none does. ``grouped``
    (keys and values): rows matched in another order count only where the call's groups hold no more tokens
    than A_l's (a query may fold its heads into the rows: multi-query attention's (B, n·H, d_h))."""
    for t in seen:
        for x in mine:
            how = matches(t, x, tol, per_row)
            if how == "as rows" and grouped and t.shape[-2] > x.shape[-2]:
                continue
            if how is not None:
                return how
    return None


def _wider(seen: list[Tensor], mine: list[Tensor], tol: float) -> tuple[int, int] | None:
    """(tokens per group of the call's tensor, of A_l's) where one of ``seen`` holds the rows of one of
    ``mine`` in larger groups: the call attends across what was read as separate groups or samples (FSMT's
    encoder runs (sequence, batch, width): read batch first, its samples' tokens are split apart)."""
    for t in seen:
        for x in mine:
            if t.shape[-2] > x.shape[-2] and matches(t, x, tol) == "as rows":
                return int(t.shape[-2]), int(x.shape[-2])
    return None


@dataclass(frozen=True)
class Site:
    """One generic layer's attention call to watch."""

    spec: LayerSpec
    attn: nn.Module
    fused: bool  # its Q/K/V come from one projection the path split
    elsewhere: tuple[str, ...] = ()  # roles computed from other tokens than A_l's (class token, pooling, …)
    channels: bool = False  # attention over channels (cross-covariance: P is d_h × d_h)


def site(spec: LayerSpec) -> Site:
    """A generic layer's attention module (the module its A_l probe reads) and its reading's shape."""
    attn = spec.attn_in.module
    reading = read(attn)
    if reading is None:
        return Site(spec, attn, False, ROLES)
    elsewhere = (("q",) if reading.queries else ()) + (("k", "v") if reading.keys else ())
    channels = (reading.windows or "").startswith("over channels")
    return Site(spec, attn, reading.kind not in ("separate", PARAMS), elsewhere, channels)


def sites(adapter: Adapter, chosen: Collection[int] | None = None) -> list[Site]:
    """The layers whose reading is to be proven: the generic ones (of ``chosen``, None: all)."""
    return [
        site(s)
        for s in adapter.layers
        if s.qkv_source.startswith("generic") and (chosen is None or s.index in chosen)
    ]


def _hooks(
    group: list[Site],
    batch: int,
    proofs: dict[int, Proof],
    open_watches: list[Watch],
    on_judged: Callable[[], None] | None,
) -> list[Any]:
    """The pre- and post-hook on the attention module that ``group``'s layers share: call k is layer k's."""
    calls = [0]
    pending: list[tuple[Site, Tensor, Watch] | None] = []

    def enter(module: nn.Module, args: Any, kwargs: Any) -> None:
        k = calls[0]
        calls[0] += 1
        if k >= len(group):
            pending.append(None)
            return
        site = group[k]
        a = site.spec.attn_in.take(args, kwargs, None, batch)
        if a is None:
            pending.append(None)
            return
        watch = Watch()
        watch.__enter__()  # type: ignore[no-untyped-call]
        open_watches.append(watch)
        pending.append((site, a.detach(), watch))

    def leave(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        got = pending.pop()
        if got is None:
            return
        site, a, watch = got
        open_watches.remove(watch)
        watch.__exit__(None, None, None)  # type: ignore[no-untyped-call]
        proofs[site.spec.index] = judge_all(site, a, watch)
        if on_judged is not None:
            on_judged()

    first = group[0].attn
    # the post-hook goes first: inside a capture's forward (:func:`condcli.capture.capture`, ``proving``)
    # the layer is judged before the capture's own hooks hand it on or stop the forward, and its watch,
    # entered after the capture's taps, is left before them (a mode stack is left in the reverse order)
    return [
        first.register_forward_pre_hook(enter, with_kwargs=True),
        first.register_forward_hook(leave, with_kwargs=True, prepend=True),
    ]


@contextmanager
def watching(
    todo: list[Site], batch: int, proofs: dict[int, Proof], on_judged: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hooks that watch each site's attention call (the k-th call of a shared module is its k-th layer) and
    judge it into ``proofs``, then call ``on_judged()``; removed on leaving, also where the forward raised."""
    groups: dict[int, list[Site]] = {}
    for s in todo:
        groups.setdefault(id(s.attn), []).append(s)
    open_watches: list[Watch] = []
    handles = [h for group in groups.values() for h in _hooks(group, batch, proofs, open_watches, on_judged)]
    try:
        yield
    finally:
        while open_watches:
            open_watches.pop().__exit__(None, None, None)  # type: ignore[no-untyped-call]
        for h in handles:
            h.remove()


def _unproven(proof: Proof) -> str:
    """Why a layer's reading is not proven, in words."""
    missing = [r.upper() for r in ROLES if r not in proof.proven and r not in proof.elsewhere]
    said = [f"{', '.join(missing)} not found among the tensors its attention consumes"] if missing else []
    away = [r.upper() for r in proof.elsewhere if r not in proof.proven]
    if away:
        said.append(f"{', '.join(away)} come from other tokens than A_l's and were not compared")
    return "; ".join(said)


def prove(
    adapter: Adapter, inputs: dict[str, Tensor], batch: int, chosen: Collection[int] | None = None
) -> tuple[Adapter, list[str]]:
    """Run the model once on the first batch's ``inputs`` and prove each generic layer's reading: the
    adapter with every generic layer's ``qkv_source`` (``refused`` where the proof failed), and notes."""
    todo = sites(adapter, chosen)
    if not todo:
        return adapter, []
    proofs: dict[int, Proof] = {}
    with watching(todo, batch, proofs), adapter.eager_attention(), torch.no_grad():
        adapter.run(inputs)
    return judged(adapter, todo, proofs, chosen)


def judged(
    adapter: Adapter, todo: list[Site], proofs: dict[int, Proof], chosen: Collection[int] | None = None
) -> tuple[Adapter, list[str]]:
    """The adapter as ``proofs`` (each layer of ``todo`` judged in one forward under :func:`watching`) left
    it, and notes: see :func:`prove`."""
    layers, notes = [], []
    refused, unproven, other_reading = [], [], []
    for spec in adapter.layers:
        asked = spec.qkv_source.startswith("generic") and (chosen is None or spec.index in chosen)
        proof = proofs.get(spec.index) if asked else None
        if proof is None:
            if asked:
                unproven.append(f"{spec.name} (its attention module did not run as watched)")
            layers.append(spec)
            continue
        if proof.contradicted:
            why = "; ".join(dict.fromkeys(proof.contradicted))
            said = coded("qkv-unreadable", f"the first batch contradicts the generic reading of Q/K/V: {why}")
            layers.append(replace(spec, qkv_source="generic (unverified)", refused=said))
            refused.append(f"{spec.name} ({why})")
        elif proof.verified:
            if proof.chosen is not None:
                other_reading.append(spec.name)
            weights = proof.chosen or spec.weights
            layers.append(replace(spec, qkv_source="generic (verified)", weights=weights, alternatives=()))
        else:
            layers.append(replace(spec, qkv_source="generic (unverified)"))
            unproven.append(f"{spec.name} ({_unproven(proof)})")
    verified = sum(s.qkv_source == "generic (verified)" for s in layers)
    if verified:
        notes.append(
            f"Q/K/V reading proven on the first batch for {verified} of {len(todo)} generic layers: the "
            "inferred q, k, v equal the tensors each attention consumes"
        )
    if other_reading:
        notes.append(
            f"{', '.join(other_reading[:3])}{' …' if len(other_reading) > 3 else ''}: the first reading of "
            "Q/K/V was not proven, another reading of the same weights was (a parameter's orientation, a "
            "fused layout)"
        )
    if unproven:
        notes.append(
            f"Q/K/V reading not proven (marked unverified): {', '.join(unproven[:4])}"
            + (f" and {len(unproven) - 4} more" if len(unproven) > 4 else "")
            + "; declare the layout in a TOML file passed as `adapter` to make it certain"
        )
    if refused:
        notes.append(
            f"— no numbers for {', '.join(refused[:3])}"
            + (f" and {len(refused) - 3} more" if len(refused) > 3 else "")
            + ": the generic reading of Q/K/V could not be proven; declare the model's layout in a TOML "
            "file passed as `adapter` (docs/guides/your-own-model.md)"
        )
    return replace(adapter, layers=tuple(layers)), notes
