"""Run a model on one batch with hooks and hand back X, X_l, A_l and P (docs/math.md#x, #layers).

Hooks (and the taps that watch inside an attention's call) live only inside :func:`capture` and are removed
in a ``finally`` — also when the forward raises — and fused attention, switched off only where P is captured,
is switched back on as it was.
The forward stops once every asked-for tensor has been seen (the blocks after the last chosen layer, and the
model's head, are not run), unless ``to_end`` asks for the model's own output.
Captured tensors are detached, in the model's own dtype and on its math device (a model spread over devices
with ``device_map``: its main device, :func:`condcli.loading.big_model.main_device`; each tensor is moved
there as it
arrives); :mod:`condcli.spectra` upcasts them to float64 for the math.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from condcli.adapters.base import Adapter, LayerSpec, Probe, Tap, first_input
from condcli.conditioning import Conditioning
from condcli.errors import InputError, InternalError, UsageError
from condcli.inputs.batches import Batch
from condcli.layout import to_tokens
from condcli.loading.big_model import main_device, materialized, settle

PROBES = ("x_in", "attn_in", "probs")


@dataclass
class LayerCapture:
    """One layer's tensors for one batch; a probe not asked for stays None."""

    index: int
    x_in: torch.Tensor | None = None  # (B, N, d) residual stream entering the block
    attn_in: torch.Tensor | None = None  # (B, G, n, c) attention input
    probs: torch.Tensor | None = None  # (B, G, H, q, k) attention probabilities


@dataclass
class Capture:
    """Everything captured from one forward pass."""

    x: torch.Tensor  # (B, N, d) X exactly as the model computed it (before any conditioning)
    lengths: torch.Tensor | None  # (B,) tokens per sample without padding; None: no padding
    layers: dict[int, LayerCapture] = field(default_factory=dict)
    x_conditioned: torch.Tensor | None = None  # (B, N, d) what was fed on when conditioning was applied
    output: Any = None  # the model's own output (``to_end``); None where the forward stopped early

    def samples(self, x: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Per-sample matrices with padding rows removed (docs/math.md#x): X by default, or any (B, N, ·)."""
        t = self.x if x is None else x
        if self.lengths is None:
            return list(t.unbind(0))
        return [t[b, : int(n)] for b, n in enumerate(self.lengths.tolist())]


LayerSink = Callable[[LayerCapture], None]


class Proving(Protocol):
    """A proof that watches a capture's forward (:class:`condcli.analysis.proof.InForward`)."""

    def watching(self, batch: int, on_judged: Callable[[], None]) -> AbstractContextManager[object]:
        """Its hooks on the forward; ``on_judged()`` is called after each layer it judges."""

    def done(self) -> bool:
        """Whether every layer it watches for has been judged."""


class _Seen(BaseException):
    """Raised from a hook once X and every asked-for probe of every chosen layer have been seen: the rest of
    the forward computes nothing condcli reads. A BaseException, so that a model's own ``except Exception``
    does not swallow it; :func:`capture` catches it around the forward and nowhere else."""


def exact_lookup(model: nn.Module, x: torch.Tensor, inputs: dict[str, torch.Tensor]) -> bool:
    """Whether X (B, N, d) equals, entry for entry, an ``nn.Embedding`` weight of ``model`` gathered by the
    batch's ``input_ids`` (B, N), in X's own dtype: a RoPE decoder's token embeddings, with no scale and
    nothing added. Storing such an X adds no rounding of the capture dtype (docs/math.md#spectra) — checked,
    not assumed: a scaled lookup (Gemma's ×√d), an added position embedding or a norm makes it False.
    """
    ids = inputs.get("input_ids")
    if (
        ids is None
        or ids.dtype.is_floating_point
        or tuple(ids.shape) != tuple(x.shape[:2])
        or not ids.numel()
    ):
        return False
    if int(ids.min()) < 0:  # not a gather
        return False
    top = int(ids.max())
    tables = {id(m.weight): m for m in model.modules() if isinstance(m, nn.Embedding)}
    for table in tables.values():
        with materialized(table, x.device):  # an embedding offloaded by a device map: its weights, for now
            w = table.weight.detach()
            if (
                w.dtype != x.dtype
                or w.device.type == "meta"
                or w.shape[-1] != x.shape[-1]
                or top >= w.shape[0]
            ):
                continue
            if torch.equal(w[ids.to(w.device)].to(x.device), x):
                return True
    return False


def layer_set(adapter: Adapter, layers: Iterable[int] | None) -> list[int]:
    """Sorted layer indices (None = all; negative counts from the end); out of range is one clear error.
    A layer whose generic reading failed its proof (``LayerSpec.refused``) is left out: it has no numbers."""
    count = len(adapter.layers)
    refused = {s.index for s in adapter.layers if s.refused is not None}
    if layers is None:
        return [i for i in range(count) if i not in refused]
    chosen = sorted({i if i >= 0 else count + i for i in layers})
    bad = [i for i in chosen if not 0 <= i < count]
    if bad:
        raise InputError(
            f"`layers` asks for a layer this model does not have ({count} layers: 0…{count - 1})",
            "pass indices between 0 and the last layer; negative ones count from the end (e.g. 0,3,-1)",
        )
    return [i for i in chosen if i not in refused]


class _Recorder:
    """Collects probe values; hands a layer to the sink once every asked-for probe it has has fired.

    Every probe is optional: a layer whose P cannot be observed (``LayerSpec.probs`` is None) is handed over
    with X_l and A_l alone, so the rest of its analysis still runs.
    """

    def __init__(
        self,
        wanted: Collection[str],
        specs: Iterable[LayerSpec],
        sink: LayerSink | None,
        device: torch.device | None = None,
    ) -> None:
        self.device = device  # where every captured tensor goes (None: where it was computed)
        self.wanted = tuple(p for p in PROBES if p in wanted)
        self.expect = {s.index: tuple(p for p in self.wanted if getattr(s, p) is not None) for s in specs}
        self.sink = sink
        self.layers: dict[int, LayerCapture] = {}
        self.fired: dict[tuple[int, str], int] = {}
        self.pending = {i for i, expect in self.expect.items() if expect}  # layers not yet complete
        self.on_complete: Callable[[], None] | None = None  # called when the last pending layer completes
        self.delivered: set[int] = set()  # layers handed to the sink

    def put(self, index: int, probe: str, value: torch.Tensor | None) -> None:
        key = (index, probe)
        self.fired[key] = self.fired.get(key, 0) + 1
        if self.fired[key] > 1:
            raise InternalError(
                f"layer {index}: the {probe} probe fired twice in one forward pass",
                "this model reuses a module; report it with the model name",
            )
        layer = self.layers.setdefault(index, LayerCapture(index))
        setattr(layer, probe, None if value is None else value.detach().to(self.device))
        if not all((index, p) in self.fired for p in self.expect[index]):
            return
        if self.sink is not None:
            self.sink(self.layers.pop(index))
            self.delivered.add(index)
        self.pending.discard(index)
        if not self.pending and self.on_complete is not None:
            self.on_complete()


def _shared(adapter: Adapter, name: str) -> list[list[LayerSpec]]:
    """The layers whose ``name`` probe reads the same module call, grouped, each group in layer order.

    A module shared by several layers (ALBERT runs one block num_hidden_layers times) is called once per
    layer: its k-th call belongs to the k-th layer of its group (docs/math.md#layers, shared layers).
    """
    groups: dict[tuple[int, bool], list[LayerSpec]] = {}
    for spec in adapter.layers:
        probe: Probe | None = getattr(spec, name)
        if probe is not None:
            groups.setdefault((id(probe.module), probe.after), []).append(spec)
    return list(groups.values())


def _hook(
    name: str,
    group: list[LayerSpec],
    chosen: Collection[int],
    batch: int,
    recorder: _Recorder,
    taps: list[Tap],
    module: nn.Module,
) -> list[RemovableHandle]:
    """The hook(s) on the module that ``group``'s ``name`` probes share: call k goes to its k-th layer.

    A tapped probe runs each call of a chosen layer inside a fresh tap, entered by a pre-hook and left by
    the post-hook; ``taps`` holds those entered and not yet left (capture leaves them if the forward raises).
    """
    calls = [0]

    def due() -> LayerSpec:
        k = calls[0]
        if k >= len(group):
            raise InternalError(
                f"layer {group[-1].index}: the {name} probe fired twice in one forward pass",
                "this model reuses a module; report it with the model name",
            )
        return group[k]

    def fire(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        spec = due()
        calls[0] += 1
        if spec.index in chosen:
            probe: Probe = getattr(spec, name)
            recorder.put(spec.index, name, probe.take(args, kwargs, output, batch))

    first: Probe = getattr(group[0], name)
    if first.tap is not None:
        make, mine = first.tap, list[Tap | None]()

        def enter(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            tap = make() if due().index in chosen else None
            mine.append(tap)
            if tap is not None:
                tap.__enter__()
                taps.append(tap)

        def leave(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            tap = mine.pop()
            if tap is not None:
                taps.remove(tap)
                tap.__exit__(None, None, None)
            fire(args, kwargs, None if tap is None else tap.result())

        return [
            module.register_forward_pre_hook(enter, with_kwargs=True),
            module.register_forward_hook(leave, with_kwargs=True),
        ]
    if first.after:

        def post(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            fire(args, kwargs, output)

        return [module.register_forward_hook(post, with_kwargs=True)]

    def pre(m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        fire(args, kwargs, None)

    return [module.register_forward_pre_hook(pre, with_kwargs=True)]


STABLE = (
    "describe the model's stable modules in a TOML file passed as `adapter` (docs/guides/your-own-model.md)"
)


# a module the model replaced inside a forward → its path (where its replacement is hooked from then on)
_PATHS: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()


def restored(model: nn.Module, attached: set[int], module: nn.Module) -> nn.Module:
    """The module to hook for ``module``: itself while the model holds it, else the one now at its path
    (recorded by :func:`moved`), or, where the model replaced it before any capture saw it, the innermost
    module that computes with the very same parameters; else ``module`` itself."""
    if id(module) in attached:
        return module
    path = _PATHS.get(module)
    if path is not None:
        try:
            return model.get_submodule(path)
        except AttributeError:
            return module
    own = sorted(map(id, module.parameters()))
    same = [m for m in model.modules() if own and sorted(map(id, m.parameters())) == own]
    return same[-1] if same else module


def moved(model: nn.Module, before: dict[str, nn.Module], modules: list[nn.Module]) -> list[str]:
    """The paths where the model replaced one of ``modules`` during the forward (``before``: its modules by
    path when the forward began), each recorded for :func:`restored`.

    A replacement is followed only where the module it re-created computes with the very same parameters
    (BigBird's ``set_attention_type`` re-creates its attention around the same q, k, v projections):
    condcli's weights were read from the one it replaced. Else one line (exit 2).
    """
    now = dict(model.named_modules())
    held = {id(m) for m in now.values()}
    where = {id(m): n for n, m in before.items()}
    out = []
    for old in dict.fromkeys(modules):
        path = where.get(id(old))
        if id(old) in held or path is None:
            continue
        parts = path.split(".")
        root = next(
            ".".join(parts[:i])
            for i in range(1, len(parts) + 1)
            if now.get(".".join(parts[:i])) is not before[".".join(parts[:i])]
        )
        was, new = before[root], now.get(root)
        if (
            new is None
            or path not in now
            or sorted(map(id, was.parameters())) != sorted(map(id, new.parameters()))
        ):
            raise InputError(
                f"{type(model).__name__} replaced its module '{root}' during the forward "
                f"({type(was).__name__} → {type(new).__name__}) with other weights than those condcli read",
                STABLE,
            )
        _PATHS[old] = path
        out.append(path)
    return out


def capture(
    adapter: Adapter,
    batch: Batch,
    *,
    layers: Iterable[int] | None = None,
    probes: Collection[str] = PROBES,
    conditioning: Conditioning | None = None,
    sink: LayerSink | None = None,
    to_end: bool = False,
    proving: Proving | None = None,
    _again: bool = False,
) -> Capture:
    """One forward pass of ``adapter.model`` on ``batch`` with hooks; returns what they saw.

    ``layers``: indices to capture (None = all; negative counts from the end). ``probes``: any of
    "x_in", "attn_in", "probs". ``conditioning``: apply λI_k or the Theorem 4.4 correction to X and let the
    model run on (the conditioned forward). ``sink``: receive each layer as soon as it is complete instead
    of keeping it (memory stays flat in depth). Fused attention is switched off only where "probs" is asked
    for: X, X_l and A_l are what the model computes in its own (fused) forward.

    The forward stops as soon as X and every asked-for probe of every chosen layer have been seen: what comes
    after (later blocks, the head) cannot change them. ViT-B on all layers skips its last MLP and head;
    ``--layers 0`` of a 32-layer decoder runs one block. ``to_end``: run the whole model anyway, and keep its
    output in :attr:`Capture.output` (None otherwise where the forward stopped).

    ``proving``: the generic reading's proof, watching this very forward where it runs eager attention
    (:func:`runs_eager`; :mod:`condcli.analysis.proof`,
    docs/performance.md#the-proof-in-the-captures-forward); the forward then stops only once it is done too.
    """
    unknown = set(probes) - set(PROBES)
    if unknown:
        raise InternalError(f"unknown probe(s) {sorted(unknown)}", f"use any of {PROBES}")
    if conditioning is not None and adapter.builtin is not None:
        raise UsageError(
            f"this model already adds {adapter.builtin.describe()} at X in its own forward",
            "its plain forward is the conditioned one; compare it with its plain twin instead",
        )
    chosen = layer_set(adapter, layers)
    dtype = next(adapter.model.parameters()).dtype
    device = main_device(adapter.model)  # a dispatched model's hooks move the inputs on from there
    # token ids stay integers; pixels follow the model's dtype (e.g. a dtype="float64" rerun)
    inputs = {
        k: v.to(device, dtype) if v.is_floating_point() else v.to(device) for k, v in batch.inputs.items()
    }
    lengths = batch.lengths.to(device) if batch.lengths is not None else None
    size = batch.size
    recorder = _Recorder(probes, (adapter.layers[i] for i in chosen), sink, device)
    model = adapter.model
    before = dict(model.named_modules())  # the modules the model holds before the forward, by path
    held = {id(m) for m in before.values()}
    targets: dict[int, nn.Module] = {}  # each probe's module → the module hooked for it in this forward

    def resolve(module: nn.Module) -> nn.Module:
        return targets.setdefault(id(module), restored(model, held, module))

    seen: dict[str, torch.Tensor] = {}
    point = adapter.embedding
    watched: Proving | None = None  # the proof watching this forward

    def stop_if_seen() -> None:
        if not to_end and "x" in seen and not recorder.pending and (watched is None or watched.done()):
            raise _Seen

    recorder.on_complete = stop_if_seen

    def condition(value: Any) -> torch.Tensor | None:
        """Record X at the embedding point's first call (a shared first block runs again later); return
        what the model should run on (None: unchanged)."""
        if "x" in seen:
            return None
        if not isinstance(value, torch.Tensor):
            raise InternalError(f"{point.name} gave {type(value).__name__}, not a tensor")
        seen["x"] = to_tokens(value, point.layout).detach().to(device)
        if conditioning is None:
            stop_if_seen()
            return None
        here = None if lengths is None else lengths.to(value.device)
        fed = conditioning.apply_to_output(value, point.layout, here)
        seen["x_conditioned"] = to_tokens(fed, point.layout).detach().to(device)
        stop_if_seen()
        return fed

    def on_output(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        return condition(output)

    def on_input(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        fed = condition(first_input(args, kwargs, None, size))
        if fed is None:
            return None
        if args:
            return (fed, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": fed}

    handles: list[RemovableHandle] = []
    taps: list[Tap] = []  # entered and not yet left: only where the forward raised inside a tapped call
    output, stopped = None, False
    try:
        # The embedding hook goes first: a probe on the same module (DaViT's layer-0 X_l reads the cpe1
        # output that is also X) then sees the conditioned tensor, as the model does.
        if point.at_input:
            handles.append(resolve(point.module).register_forward_pre_hook(on_input, with_kwargs=True))
        else:
            handles.append(resolve(point.module).register_forward_hook(on_output))
        wanted = set(chosen)
        for name in recorder.wanted:
            for group in _shared(adapter, name):
                if wanted.intersection(s.index for s in group):
                    module = resolve(getattr(group[0], name).module)
                    handles.extend(_hook(name, group, wanted, size, recorder, taps, module))
        # eager attention only where P is captured: X_l and A_l alone need no materialised P, and the model
        # runs its own (fused) attention, as a user's forward does
        needs_p = runs_eager(adapter, chosen, probes)
        eager = adapter.eager_attention() if needs_p else nullcontext()
        if proving is not None and needs_p:
            watched = proving
        watch = watched.watching(size, stop_if_seen) if watched is not None else nullcontext()
        if adapter.family in ("generic", "declared"):  # a block run by .forward() (SqueezeBERT), issue 42
            hooked = [resolve(point.module)]
            hooked += [
                resolve(getattr(adapter.layers[i], n).module) for i in chosen for n in ("x_in", "attn_in")
            ]
            handles.extend(_route_forward(hooked))
        with eager, torch.no_grad(), watch:
            output = adapter.run(inputs)
    except _Seen:  # everything asked for was seen: the rest of the forward was not run
        stopped = True
    finally:
        while taps:  # innermost first, as they were entered
            taps.pop().__exit__(None, None, None)
        for h in handles:
            h.remove()
    if stopped:  # a block it stopped in has its offloaded weights offloaded again, hooks and taps gone
        settle(adapter.model)
    silent_keys = [
        (i, n)
        for i in chosen
        for n in recorder.wanted
        if getattr(adapter.layers[i], n) is not None and (i, n) not in recorder.fired
    ]
    silent = [f"{adapter.layers[i].name}:{n}" for i, n in silent_keys]
    lost = [point.module] * ("x" not in seen) + [getattr(adapter.layers[k], n).module for k, n in silent_keys]
    replaced = moved(model, before, [resolve(m) for m in lost]) if lost else []
    if replaced and not _again:  # hooked where they now are (re-created once: BigBird's switch)
        done = recorder.delivered  # the sink has them already: not handed over twice

        def rest(layer: LayerCapture) -> None:
            if sink is not None and layer.index not in done:
                sink(layer)

        return capture(
            adapter,
            batch,
            layers=layers,
            probes=probes,
            conditioning=conditioning,
            sink=None if sink is None else rest,
            to_end=to_end,
            proving=proving,
            _again=True,
        )
    if replaced:
        raise InputError(
            f"{type(model).__name__} re-creates its module '{replaced[0]}' at every forward: hooks on it "
            "never fire",
            STABLE,
        )
    gone = [m for m in lost if id(resolve(m)) not in held]
    if gone:  # replaced by a forward outside any capture, with nothing left to tell what replaced it
        raise InputError(
            f"{type(model).__name__} replaced its module {type(gone[0]).__name__} in an earlier forward: "
            "hooks on the one condcli found never fire",
            f"load the model again and analyse it before running it yourself, or {STABLE}",
        )
    if lost and adapter.family in ("generic", "declared"):  # still in place, yet its hooks never fired
        where = point.name if "x" not in seen else silent[0]
        raise InputError(
            f"[inputs] {type(model).__name__} never ran its module {where} on the inputs condcli gave it "
            f"({', '.join(sorted(inputs))}): a part of the model that other inputs drive (an image tower "
            "given text), or one it does not call at all, so condcli cannot observe what it computes",
            "give the inputs that part reads (`images`, `text`), or open an issue with the model name",
        )
    if "x" not in seen:
        raise InternalError(f"the embedding point {point.name} never ran", "report it with the model name")
    if silent:
        raise InternalError(f"probe(s) never fired: {', '.join(silent[:4])}", "report it with the model name")
    result = Capture(
        x=seen["x"],
        lengths=lengths,
        layers=recorder.layers,
        x_conditioned=seen.get("x_conditioned"),
        output=output,
    )
    return result


def runs_eager(adapter: Adapter, chosen: Iterable[int], probes: Collection[str] = PROBES) -> bool:
    """Whether :func:`capture` of ``chosen`` layers switches fused attention off: where it captures P."""
    return "probs" in probes and any(adapter.layers[i].probs is not None for i in chosen)


class _Routed:
    """Undoes :func:`_route_forward` on one module (a handle like a hook's)."""

    def __init__(self, module: nn.Module, hooks: list[RemovableHandle]) -> None:
        self.module, self.hooks = module, hooks

    def remove(self) -> None:
        self.module.__dict__.pop("forward", None)
        for h in self.hooks:
            h.remove()


def _route_forward(modules: list[nn.Module]) -> list[Any]:
    """Each module's direct ``.forward()`` calls routed through its ``__call__``, so that its hooks fire
    where the model runs a block by ``layer.forward(...)`` (SqueezeBERT's encoder); a call through
    ``__call__`` is unchanged. Returns the handles that undo it."""
    out: list[Any] = []
    for m in {id(m): m for m in modules}.values():
        if "forward" in m.__dict__:
            continue
        inside = [False]

        def enter(module: nn.Module, args: Any, flag: list[bool] = inside) -> None:
            flag[0] = True

        def leave(module: nn.Module, args: Any, output: Any, flag: list[bool] = inside) -> None:
            flag[0] = False

        def forward(*args: Any, _m: nn.Module = m, _in: list[bool] = inside, **kwargs: Any) -> Any:
            if _in[0]:  # the class's forward as it is now (an SDPA attention swapped for its eager twin)
                return type(_m).forward(_m, *args, **kwargs)
            try:
                return _m(*args, **kwargs)
            finally:
                _in[0] = False

        hooks = [m.register_forward_pre_hook(enter, prepend=True), m.register_forward_hook(leave)]
        m.__dict__["forward"] = forward
        out.append(_Routed(m, hooks))
    return out
