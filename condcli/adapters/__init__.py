"""Family adapters: one module per family, tried in order; the generic fallback comes last.

Each family module has ``matches(model) -> bool`` and ``build(model) -> Adapter``. :func:`adapter_for` is
the one way to the adapter of a model, with the model's own conditioning (a :class:`ConditionedEmbedding`
at X) already seen through; :func:`condition_model` wraps the embedding point an adapter names.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from torch import nn

from condcli.adapters.base import Adapter, EmbeddingPoint, HeadWeights, LayerSpec, Probe
from condcli.conditioning import ConditionedEmbedding, Mode
from condcli.errors import UsageError

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


def adapter_for(model: nn.Module, declared: Path | None = None) -> Adapter:
    """The adapter of the first family that recognises ``model`` (the generic one raises if it cannot), or
    the one the ``declared`` adapter file describes (:mod:`condcli.adapters.declared`)."""
    if declared is not None:
        return _seen_through(_family("declared").build(model, declared))
    for name in FAMILIES:
        module = _family(name)
        if module.matches(model):
            return _seen_through(module.build(model))
    raise AssertionError("the generic adapter matches every model")  # pragma: no cover


def _seen_through(found: Adapter) -> Adapter:
    """The family's adapter, completed for a model that conditions its own tokens.

    Where the family's embedding point is a :class:`ConditionedEmbedding`, X is taken before the shift
    (the paper's X, right after positional encoding), the blocks see X + λ·I_k, and ``builtin`` says what
    the model adds. The result is a new adapter; the family's is never handed out.
    """
    point = found.embedding
    if not isinstance(point.module, ConditionedEmbedding):
        return found
    own = point.module.conditioning
    return replace(
        found,
        embedding=replace(
            point,
            module=point.module.inner,
            name=f"{point.name}.inner",
            description=f"{point.description}, before the model's own {own.describe()}",
        ),
        builtin=own,
        notes=(
            f"the model adds {own.describe()} at {point.name} itself: X is taken before it,"
            " the blocks see the sum",
            *found.notes,
        ),
    )


def condition_model(model: nn.Module, lam: float = 10.0, mode: Mode = "shift") -> nn.Module:
    """Wrap ``model``'s embedding point (named by its adapter) in a :class:`ConditionedEmbedding`.

    Works for every family condcli supports; returns the same model, changed in place. For text with
    padding use a forward hook with :meth:`Conditioning.apply` and the attention mask's lengths instead.
    """
    adapter = adapter_for(model)
    point = adapter.embedding
    if adapter.builtin is not None:
        raise UsageError(
            f"this model already adds {adapter.builtin.describe()} at X", "condition a model once"
        )
    if point.at_input:
        raise UsageError(
            f"X of this model is the input of {point.name}, not the output of an embedding module",
            "condition it with a forward pre-hook on that module that returns Conditioning.apply(X)",
        )
    model.set_submodule(point.name, ConditionedEmbedding(point.module, lam, mode, point.layout))
    return model


__all__ = [
    "FAMILIES",
    "Adapter",
    "EmbeddingPoint",
    "HeadWeights",
    "LayerSpec",
    "Probe",
    "adapter_for",
    "condition_model",
]
