"""What every family adapter tells condcli about a model (docs/math.md#x, #layers), as plain typed objects.

An adapter never runs the analysis. It names: where X is taken (:class:`EmbeddingPoint`), the attention
layers (:class:`LayerSpec`) and, for each, three :class:`Probe` s — the residual stream X_l entering the
block, the attention input A_l, and the attention probabilities P as the family really computes them —
plus the per-head projection weights (:class:`HeadWeights`). :mod:`condcli.capture` turns probes into hooks.

Shapes every probe returns (B = batch, G = attention groups, e.g. Swin windows; 1 for global attention):
X_l ``(B, N, d)``, A_l ``(B, G, n, c)``, P ``(B, G, H, q, k)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import dropwhile
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from torch import nn

from condcli.conditioning import Conditioning
from condcli.errors import CondcliError, InternalError
from condcli.layout import Layout
from condcli.reports.refusal import Refused

# take(args, kwargs, output, batch_size) -> tensor; output is None for a pre-forward probe, and what the tap
# saw for a tapped one. A probe may return None where the module call carries nothing to take (e.g. an
# attention that returned no weights): the probe then counts as fired with no value, and the layer is
# analysed without it.
Take = Callable[[tuple[Any, ...], dict[str, Any], Any, int], torch.Tensor | None]


class Tap(Protocol):
    """Watches a module's call from inside (e.g. a TorchFunctionMode): capture enters it right before the
    call, leaves it right after, or in its ``finally`` where the call raised."""

    def __enter__(self) -> Any: ...

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any: ...

    def result(self) -> torch.Tensor | None:
        """What it saw during the call (None: nothing)."""
        ...


@dataclass(frozen=True)
class Probe:
    """Read one tensor from one module call: before it runs (``after=False``) or from its output.

    With ``tap``, the call runs inside a fresh tap and ``take`` reads what the tap saw instead of the
    output (P computed as a plain function inside the attention: :mod:`condcli.adapters.softmax_tap`).
    """

    module: nn.Module
    take: Take
    after: bool
    tap: Callable[[], Tap] | None = None

    def __post_init__(self) -> None:
        if self.tap is not None and not self.after:
            raise ValueError("a tapped probe reads its module's call once it has run: after=True")


def first_input(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    """The module's first positional input, else its ``hidden_states`` keyword, else its first tensor keyword
    (SAM's mask decoder calls its attention with query=, key=, value=): the tensor the generic discovery
    traced as the call's input."""
    x = args[0] if args else kwargs.get("hidden_states")
    if x is None:
        x = next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)
    if not isinstance(x, torch.Tensor):
        raise InternalError(
            f"a watched module was called with no tensor input (positional {len(args)}, keywords "
            f"{', '.join(kwargs) or 'none'})",
            "report it with the model name",
        )
    return x


def one_group(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    """The module's first input as one attention group: (B, ...) → (B, 1, ...).

    Serves global attention inputs (B, N, d) → (B, 1, N, d) and unwindowed P (B, H, q, k) → (B, 1, H, q, k).
    """
    return first_input(args, kwargs, output, batch).unsqueeze(1)


def first_output(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    """The module's output (its first element when it returns a tuple)."""
    out = output[0] if isinstance(output, tuple | list) else output
    assert isinstance(out, torch.Tensor)
    return out


def group_tokens(x: torch.Tensor, batch: int) -> torch.Tensor:
    """(B·G, n, c) attention input (windows, B outermost as timm partitions them) → (B, G, n, c)."""
    return x.reshape(batch, -1, *x.shape[-2:])


def windows_in(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    """The module's first input, (B·G, n, c) windows → (B, G, n, c) (Swin and DaViT window attention)."""
    return group_tokens(first_input(args, kwargs, output, batch), batch)


def group_probs(p: torch.Tensor, batch: int) -> torch.Tensor:
    """(B·G, H, q, k) probabilities → (B, G, H, q, k)."""
    return p.reshape(batch, -1, *p.shape[-3:])


@dataclass(frozen=True)
class EmbeddingPoint:
    """Where X is taken: the output of ``module`` (path ``name``), in ``layout``."""

    module: nn.Module
    name: str
    description: str  # shown to the user, e.g. "output of pos_drop (patch + position embedding)"
    layout: Layout = "tokens"
    after_position_encoding: bool = True  # False: the family has none; X is the first-block input
    at_input: bool = False  # X is the module's first input instead of its output (generic adapter)


@dataclass(frozen=True)
class HeadWeights:
    """Per-head projection slices, float64: W (H, d, d_h) such that q_h = A_l W_Q[h] + b_Q[h].

    Grouped-query attention (docs/math.md#layers): W_K and W_V may have fewer heads, (H_kv, d, d_h) with H_kv
    dividing H, and query head h reads KV head h // (H / H_kv). Multi-head attention is the case H_kv = H.
    """

    wq: torch.Tensor
    wk: torch.Tensor
    wv: torch.Tensor
    bq: torch.Tensor | None = None  # (H, d_h)
    bk: torch.Tensor | None = None  # (H_kv, d_h)
    bv: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.wk.shape[0] != self.wv.shape[0] or self.heads % self.kv_heads:
            raise ValueError(
                f"W_K/W_V have {self.wk.shape[0]}/{self.wv.shape[0]} heads for {self.heads} query heads: "
                "they must be equal and divide the query heads"
            )

    @property
    def heads(self) -> int:
        return int(self.wq.shape[0])

    @property
    def kv_heads(self) -> int:
        return int(self.wk.shape[0])

    def kv_index(self) -> torch.Tensor:
        """(H,) the KV head each query head reads."""
        return torch.arange(self.heads) // (self.heads // self.kv_heads)

    def per_query(self, which: Literal["k", "v"]) -> torch.Tensor:
        """W_K or W_V as (H, d, d_h): each query head's KV slice (a repeat under grouped-query attention)."""
        w = self.wk if which == "k" else self.wv
        return w if self.kv_heads == self.heads else w[self.kv_index().to(w.device)]

    def full(self, which: Literal["q", "k", "v"]) -> torch.Tensor:
        """The whole d × (heads·d_h) projection, heads side by side (the matrix the family multiplies by;
        d × (H_kv·d_h) for W_K and W_V under grouped-query attention)."""
        return join_heads({"q": self.wq, "k": self.wk, "v": self.wv}[which])


def join_heads(w: torch.Tensor) -> torch.Tensor:
    """(H, d, d_h) → the d × (H·d_h) matrix, heads side by side (the inverse of :func:`split_heads`)."""
    return w.permute(1, 0, 2).reshape(w.shape[1], -1)


def split_heads(w_t: torch.Tensor, heads: int) -> torch.Tensor:
    """A d × (H·d_h) right-multiplying matrix → (H, d, d_h), float64 (heads contiguous)."""
    d, hd = w_t.shape
    return w_t.detach().to(torch.float64).reshape(d, heads, hd // heads).permute(1, 0, 2).contiguous()


def split_bias(b: torch.Tensor | None, heads: int) -> torch.Tensor | None:
    return None if b is None else b.detach().to(torch.float64).reshape(heads, -1)


def head_split(
    w: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    b: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None],
    heads: int,
    kv_heads: int,
) -> HeadWeights:
    """Right-multiplying W_Q (d × H·d_h), W_K and W_V (d × H_kv·d_h) and their biases → per-head slices."""
    return HeadWeights(
        split_heads(w[0], heads),
        split_heads(w[1], kv_heads),
        split_heads(w[2], kv_heads),
        split_bias(b[0], heads),
        split_bias(b[1], kv_heads),
        split_bias(b[2], kv_heads),
    )


def linear_qkv(weight: torch.Tensor, bias: torch.Tensor | None, heads: int) -> HeadWeights:
    """timm-style fused ``qkv`` nn.Linear: weight (3·H·d_h, d) ordered [Q|K|V], heads contiguous."""
    return fused_qkv(weight, bias, heads, heads, "stacked")


FusedLayout = Literal["stacked", "per_head", "per_group", "sharded_qvk"]


def fused_rows(
    layout: FusedLayout, heads: int, kv_heads: int, head_dim: int, shards: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which output rows of a fused Q/K/V projection are Q (H·d_h, head after head), K and V (H_kv·d_h).

    ``stacked``: [Q | K | V] (timm ``qkv``, Phi-3 ``qkv_proj``, Falcon multi-query with H_kv = 1).
    ``per_head``: (H, 3, d_h), each head's q, k, v side by side (GPT-NeoX, Bloom, Falcon multi-head).
    ``per_group``: (H_kv, H/H_kv + 2, d_h), each KV group's queries then its k and v (Falcon's
    new_decoder_architecture); query head g·(H/H_kv) + j is the j-th query of group g.
    ``sharded_qvk``: (shards, 3, H·d_h/shards), each shard's q, then v, then k (CodeGen's ``mp_num`` = 4
    model-parallel shards: ``qkv.view(..., shards, 3·local).split(local)`` gives query, value, key); the
    heads run on across the shards.
    """
    if heads % kv_heads or (layout in ("per_head", "sharded_qvk") and kv_heads != heads):
        raise ValueError(f"a {layout} fused projection cannot hold {heads} query and {kv_heads} KV heads")
    qw, kw = heads * head_dim, kv_heads * head_dim
    if layout == "stacked":
        return torch.arange(qw), torch.arange(qw, qw + kw), torch.arange(qw + kw, qw + 2 * kw)
    if layout == "per_head":
        r = torch.arange(3 * qw).view(heads, 3, head_dim)
        return r[:, 0].flatten(), r[:, 1].flatten(), r[:, 2].flatten()
    if layout == "sharded_qvk":
        if qw % shards:
            raise ValueError(f"{heads}·{head_dim} query rows do not split into {shards} shards")
        r = torch.arange(3 * qw).view(shards, 3, qw // shards)
        return r[:, 0].flatten(), r[:, 2].flatten(), r[:, 1].flatten()
    group = heads // kv_heads
    r = torch.arange(qw + 2 * kw).view(kv_heads, group + 2, head_dim)
    return r[:, :group].flatten(), r[:, group].flatten(), r[:, group + 1].flatten()


def fused_qkv(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    heads: int,
    kv_heads: int,
    layout: FusedLayout,
    shards: int = 1,
) -> HeadWeights:
    """A fused projection's weight ((H + 2·H_kv)·d_h, d) and bias split the way ``layout`` lays them out."""
    rows = int(weight.shape[0])
    if rows % (heads + 2 * kv_heads):
        raise ValueError(
            f"a fused projection of {rows} rows cannot hold {heads} query and {kv_heads} KV heads "
            "of equal width"
        )
    q, k, v = fused_rows(layout, heads, kv_heads, rows // (heads + 2 * kv_heads), shards)
    ws = (weight[q].T, weight[k].T, weight[v].T)
    bs = (None, None, None) if bias is None else (bias[q], bias[k], bias[v])
    return head_split(ws, bs, heads, kv_heads)


def separate_qkv(
    q: nn.Linear, k: nn.Linear, v: nn.Linear, heads: int, kv_heads: int | None = None
) -> HeadWeights:
    """Three nn.Linear projections (BERT, HF ViT, Nyströmformer; Llama-style GQA with ``kv_heads``)."""
    kv = heads if kv_heads is None else kv_heads
    return head_split((q.weight.T, k.weight.T, v.weight.T), (q.bias, k.bias, v.bias), heads, kv)


# per-head q, k (..., n, d_h) at positions 0..n−1 → as the model rotates them (RoPE)
Rotation = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


# how a layer's Q/K/V projections were found (the report's ``qkv_source``): a family adapter's own reading, a
# declared (TOML) one, or the generic path's, proven on the model's first batch or not
QKVSource = Literal["family", "declared", "generic (verified)", "generic (unverified)"]


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer of the model."""

    index: int
    name: str  # module path of the block
    attention: str  # what P is, in words: "softmax over tokens", "softmax in 7×7 windows", …
    heads: int
    x_in: Probe  # → (B, N, d): residual stream entering the block
    attn_in: Probe  # → (B, G, n, c): input of the attention operator (after pre-norm)
    probs: Probe | None  # → (B, G, H, q, k); None where the family's P cannot be observed
    weights: Callable[[], HeadWeights]
    approximation: bool = False  # P is an approximation of softmax attention (Nyströmformer)
    causal: bool = False  # a causal mask: query i attends to the keys up to its own position
    window: int | None = None  # a local (sliding-window) mask: causal, the last ``window`` keys; else ±window
    rotation: Rotation | None = None  # how the model rotates q and k (RoPE); None: no rotation known
    # the matrix that really mixes the tokens, from P (..., H, q, k) → same shape, where it is not P itself
    # (shaped attention αI + βP); None: the attention mixes with P
    mixing: Callable[[torch.Tensor], torch.Tensor] | None = None
    no_probs: str = (  # why P cannot be observed, shown where ``probs`` is None
        "P cannot be observed: the attention computes its softmax as a function, "
        "with no module or returned weights to hook"
    )
    qkv_source: QKVSource = "family"
    # other readings of the generic path (a parameter's orientation, an unknown fused layout), tried by the
    # first batch's proof where ``weights`` is not proven; the one proven replaces it, none is used unproven
    alternatives: tuple[Callable[[], HeadWeights], ...] = ()
    # why this layer yields no number: the generic reading of its Q/K/V failed its proof on the first batch
    # (:mod:`condcli.adapters.generic.verify`); None: the layer is analysed
    refused: str | None = None

    @property
    def probs_note(self) -> str | None:
        """None where P is observed, else why it is not (μ(A), κ(P) and H(P) are then absent)."""
        return None if self.probs is not None else self.no_probs


@dataclass(frozen=True)
class Adapter:
    """A model's analysable structure, immutable once built (by :func:`condcli.adapters.adapter_for`)."""

    family: str  # registry key, e.g. "timm-vit"
    model: nn.Module
    embedding: EmbeddingPoint
    layers: tuple[LayerSpec, ...]
    input_kind: Literal["images", "text"]
    notes: tuple[str, ...] = ()  # what could not be found, shown to the user
    forward: Callable[[dict[str, torch.Tensor]], Any] | None = None  # default: model(**inputs)
    fused_flags: tuple[tuple[nn.Module, str], ...] = ()  # (module, attr) set False for the capture
    builtin: Conditioning | None = None  # the model's own conditioning at X (trained with conditioned tokens)

    def run(self, inputs: dict[str, torch.Tensor]) -> Any:
        """One forward pass of the model on a batch's inputs. Where the model's own code rejects them (it
        raises, from its own frames, not condcli's), the run stops with an ``inputs`` refusal that says what
        the model said it needs (issue 42). An error raised after X was formed propagates as it is (the
        callers clean up their hooks on it); the CLI reads where it came from (:func:`model_failure`)."""
        reached: list[bool] = []  # X was formed: the model took its inputs
        point = self.embedding.module
        mark = (
            point.register_forward_pre_hook(lambda *_: reached.append(True))
            if self.embedding.at_input
            else point.register_forward_hook(lambda *_: reached.append(True))
        )
        try:
            if self.forward is not None:
                return self.forward(inputs)
            return self.model(**inputs)
        except (
            ValueError,
            TypeError,
            AttributeError,
            IndexError,
            KeyError,
            RuntimeError,
            AssertionError,
        ) as e:
            oom = type(e).__name__ == "OutOfMemoryError" or any(
                w in str(e) for w in ("out of memory", "allocate memory")
            )
            if oom or reached or isinstance(e, CondcliError) or _raised_by_condcli(e):
                raise
            given = ", ".join(
                f"{k} {tuple(v.shape)}" for k, v in inputs.items() if isinstance(v, torch.Tensor)
            )
            said = " ".join(str(e).split())[:300] or type(e).__name__
            others = _other_inputs(self.model, inputs)
            also = f"; its forward also takes {', '.join(others)}" if others else ""
            raise Refused(
                "inputs",
                f"{type(self.model).__name__} rejected the inputs condcli gave it ({given}): "
                f"{type(e).__name__}: {said}{also}",
                "this model needs inputs condcli does not make; describe them with `adapter` "
                "(docs/guides/your-own-model.md) or run it through the Python API with your own batch",
            ) from e
        finally:
            mark.remove()

    @contextmanager
    def eager_attention(self) -> Iterator[None]:
        """Turn fused attention off (so P is materialised) and restore every flag afterwards."""
        saved = [(m, a, getattr(m, a)) for m, a in self.fused_flags]
        hf_impl = _hf_attn_impl(self.model)
        # models whose attention reads the config at run time but that refuse set_attn_implementation (Falcon)
        direct = hf_impl not in (None, "eager") and not _hf_can_switch(self.model)
        configs = _attn_configs(self.model)
        parts: list[tuple[Any, Any]] = []
        try:
            for m, a, _ in saved:
                setattr(m, a, False)
            if direct:
                self.model.config._attn_implementation = "eager"  # type: ignore[union-attr]
            elif hf_impl is not None and hf_impl != "eager":
                self.model.set_attn_implementation("eager")  # type: ignore[operator]
            # a part whose config the switch does not reach (MaskFormer's DETR decoder: its config is no
            # sub-config of the model's, whose own is eager already), switched on its own
            parts = _unreached(self.model) if hf_impl is not None else []
            for config, _ in parts:
                config._attn_implementation_internal = "eager"
            yield
        finally:
            for config, impl in parts:
                config._attn_implementation_internal = impl
            for m, a, v in saved:
                setattr(m, a, v)
            if direct:
                self.model.config._attn_implementation = hf_impl  # type: ignore[union-attr]
            elif hf_impl is not None and hf_impl != "eager":
                try:
                    self.model.set_attn_implementation(hf_impl)  # type: ignore[operator]
                except ValueError:  # a part that never had it (RT-DETR's backbone: no sdpa): each as it was
                    for config, impl in configs:
                        config._attn_implementation_internal = impl  # not recursively: each its own


def _attn_configs(model: nn.Module) -> list[tuple[Any, Any]]:
    """Every distinct config of ``model``'s parts with its attention implementation, to restore as it was."""
    seen: dict[int, tuple[Any, Any]] = {}
    for m in model.modules():
        config = getattr(m, "config", None)
        if config is not None and id(config) not in seen and hasattr(config, "_attn_implementation_internal"):
            seen[id(config)] = (config, getattr(config, "_attn_implementation_internal", None))
    return list(seen.values())


def _unreached(model: nn.Module) -> list[tuple[Any, Any]]:
    """The parts' configs still set to a fused attention (a string other than eager), each with it."""
    return [(c, impl) for c, impl in _attn_configs(model) if isinstance(impl, str) and impl != "eager"]


INPUT_WORDS = ("pixel", "input", "bbox", "visual", "image", "audio", "feature", "session", "values", "boxes")


def _other_inputs(model: nn.Module, given: dict[str, Any]) -> list[str]:
    """The inputs ``model.forward`` names that condcli did not give (pixel_values, bbox, …), at most 4."""
    try:
        names = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return []
    wanted = [n for n in names if n not in given and any(w in n.lower() for w in INPUT_WORDS)]
    return [n for n in wanted if not n.startswith(("output_", "return_", "use_"))][:4]


def _frames(error: BaseException) -> list[tuple[str, str]]:
    """(file, function) of each frame on ``error``'s traceback, outermost first."""
    tb, frames = error.__traceback__, []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    return frames


def _raised_by_condcli(error: BaseException) -> bool:
    """Whether condcli's own code (a hook, a probe, a tap) is on ``error``'s traceback inside the forward:
    only a model that raised from its own code, with no condcli frame below the call, rejected its inputs."""
    frames = _frames(error)
    inside = list(dropwhile(lambda f: f[0].startswith(_CONDCLI), frames))  # past run() and wrappers
    if not inside and frames:  # raised in condcli's own frame (a wrapper reading its inputs), not the model's
        return frames[-1][1] != "__torch_function__"
    return any(f.startswith(_CONDCLI) for f, _ in inside)


def model_failure(error: BaseException) -> str | None:
    """Where the model's own code raised ``error`` inside a forward condcli ran (:meth:`Adapter.run`), as
    ``file.py (function)``: its innermost frame that is neither condcli's nor torch's, where no condcli code
    stands between the call and the error but the watches that pass each torch call on unchanged
    (``__torch_function__``). None where condcli's code (a hook, a probe) is on that stretch, or the error
    did not come from a forward (issue 42: CodeGen with a rotary width past its head, found by the sweep)."""
    frames = _frames(error)
    here = str(Path(__file__).resolve())
    calls = [i for i, (f, name) in enumerate(frames) if name == "run" and str(Path(f).resolve()) == here]
    if not calls:
        return None
    # past the wrappers that only call the model (an on-request forward asking for the weights)
    inside = list(dropwhile(lambda f: f[0].startswith(_CONDCLI), frames[calls[-1] + 1 :]))
    if any(f.startswith(_CONDCLI) and name != "__torch_function__" for f, name in inside):
        return None
    torch_dir = str(Path(torch.__file__).resolve().parent)
    own = [(f, name) for f, name in inside if not f.startswith((_CONDCLI, torch_dir))]
    return f"{Path(own[-1][0]).name} ({own[-1][1]})" if own else None


_CONDCLI = str(Path(__file__).resolve().parents[1])


def _hf_attn_impl(model: nn.Module) -> str | None:
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None) if config is not None else None
    if impl is None or not hasattr(model, "set_attn_implementation"):
        return None
    return str(impl)


def _hf_can_switch(model: nn.Module) -> bool:
    """Whether an HF model accepts set_attn_implementation (transformers asks its own class)."""
    can = getattr(type(model), "_can_set_attn_implementation", None)
    return not callable(can) or bool(can())


def fused_flags(model: nn.Module) -> tuple[tuple[nn.Module, str], ...]:
    """Every timm module that carries a ``fused_attn`` switch."""
    return tuple(
        (m, "fused_attn") for m in model.modules() if isinstance(getattr(m, "fused_attn", None), bool)
    )
