"""Family adapters: one module per family, tried in order; the generic fallback comes last.

Each family module has ``matches(model) -> bool`` and ``build(model) -> Adapter``.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from types import ModuleType

from torch import nn

from condcli.adapters.base import Adapter, EmbeddingPoint, HeadWeights, LayerSpec, Probe

# Order matters: specific families first, the generic fallback last.
FAMILIES: tuple[str, ...] = (
    "timm_vit",
    "timm_swin",
    "timm_xcit",
    "timm_davit",
    "hf_bert",
    "hf_gpt2",
    "hf_vit",
    "hf_nystromformer",
    "generic",
)


def _family(name: str) -> ModuleType:
    return importlib.import_module(f"condcli.adapters.{name}")


def adapter_for(model: nn.Module) -> Adapter:
    """The adapter of the first family that recognises ``model`` (the generic one raises if it cannot)."""
    for name in FAMILIES:
        module = _family(name)
        if module.matches(model):
            adapter: Adapter = module.build(model)
            return _see_through_conditioning(adapter)
    raise AssertionError("the generic adapter matches every model")  # pragma: no cover


def _see_through_conditioning(adapter: Adapter) -> Adapter:
    """A model that conditions its own tokens (a ConditionedEmbedding at X): take X before the shift.

    X is then the paper's X (right after positional encoding); the blocks see X + λ·I_k, and
    ``adapter.builtin`` says what the model adds.
    """
    from condcli.conditioning import ConditionedEmbedding

    point = adapter.embedding
    if not isinstance(point.module, ConditionedEmbedding):
        return adapter
    builtin = point.module.conditioning
    adapter.embedding = replace(
        point,
        module=point.module.inner,
        name=f"{point.name}.inner",
        description=f"{point.description}, before the model's own {builtin.describe()}",
    )
    adapter.builtin = builtin
    adapter.notes.insert(
        0,
        f"the model adds {builtin.describe()} at {point.name} itself: X is taken before it,"
        " the blocks see the sum",
    )
    return adapter


__all__ = ["FAMILIES", "Adapter", "EmbeddingPoint", "HeadWeights", "LayerSpec", "Probe", "adapter_for"]
