"""Family adapters: one module per family, tried in order; the generic fallback comes last.

Each family module has ``matches(model) -> bool`` and ``build(model) -> Adapter``.
"""

from __future__ import annotations

import importlib
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
            return adapter
    raise AssertionError("the generic adapter matches every model")  # pragma: no cover


__all__ = ["FAMILIES", "Adapter", "EmbeddingPoint", "HeadWeights", "LayerSpec", "Probe", "adapter_for"]
