"""What the tests record themselves: their own forward hooks (and a count of those left on a model), the
sample ViT's X, X_l, A_l and P read with them, and batches replayed as a stream for the analysis."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from condcli.capture import PROBES, Capture
from condcli.inputs.batches import Batch, InputStream

if TYPE_CHECKING:
    from condcli.loading.sources import LoadedModel


def hook_count(model: nn.Module) -> int:
    """Forward hooks and forward pre-hooks on all of the model's modules."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def assert_same_capture(a: Capture, b: Capture) -> None:
    """X, X + λI_k, the layers captured and every tensor of theirs bitwise equal."""
    assert torch.equal(a.x, b.x)
    assert (a.x_conditioned is None) == (b.x_conditioned is None)
    if a.x_conditioned is not None and b.x_conditioned is not None:
        assert torch.equal(a.x_conditioned, b.x_conditioned)
    assert sorted(a.layers) == sorted(b.layers)
    for i, layer in a.layers.items():
        for probe in PROBES:
            got, want = getattr(layer, probe), getattr(b.layers[i], probe)
            assert (got is None) == (want is None), (i, probe)
            assert got is None or torch.equal(got, want), (i, probe)


def replay(batches: list[Batch], label: str = "replayed") -> InputStream:
    """The same batches again, as a stream (so analysis and reference see identical inputs)."""
    return InputStream("synthetic", label, lambda s: iter(batches), expected=sum(b.size for b in batches))


@contextmanager
def hooks(model: nn.Module, where: dict[str, tuple[nn.Module, bool]]) -> Iterator[dict[str, list]]:
    """Record a module's input (pre=True) or output for every call; removed afterwards."""
    seen: dict[str, list] = {k: [] for k in where}
    handles = []
    for key, (module, pre) in where.items():
        if pre:
            handles.append(
                module.register_forward_pre_hook(lambda m, a, k=key: seen[k].append(a[0].detach()))
            )
        else:
            handles.append(module.register_forward_hook(lambda m, a, o, k=key: seen[k].append(o.detach())))
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


def vit_reference(loaded: LoadedModel, batches: list[Batch], shift: float | None) -> dict[str, Any]:
    """X, X_l, A_l (norm1 output) and P (attn_drop input, fused attention off) read with our own hooks."""
    model = loaded.model
    where: dict[str, tuple[nn.Module, bool]] = {"x": (model.pos_drop, False)}
    for i, block in enumerate(model.blocks):
        where[f"x{i}"] = (block, True)
        where[f"a{i}"] = (block.norm1, False)
        where[f"p{i}"] = (block.attn.attn_drop, True)
    fused = [(m, m.fused_attn) for m in model.modules() if hasattr(m, "fused_attn")]
    handle = None
    if shift is not None:  # the conditioned forward, done by hand: pos_drop's output + λ·I_k
        handle = model.pos_drop.register_forward_hook(
            lambda m, a, o: o + shift * torch.eye(o.shape[1], o.shape[2], dtype=o.dtype)
        )
    try:
        for m, _ in fused:
            m.fused_attn = False
        with hooks(model, where) as seen, torch.no_grad():
            for b in batches:
                model(b.inputs["pixel_values"])
    finally:
        for m, v in fused:
            m.fused_attn = v
        if handle is not None:
            handle.remove()
    return {k: torch.cat(v).double().numpy() for k, v in seen.items()}


def vit_probs(loaded: LoadedModel, batches: list[Batch], shift: float | None = None) -> list[np.ndarray]:
    """Per layer (S, H, n, n): P read at timm's attn_drop input with the test's own hooks."""
    ref = vit_reference(loaded, batches, shift)
    return [ref[f"p{i}"] for i in range(len(loaded.model.blocks))]
