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
        return _with_mixing(_seen_through(_family("declared").build(model, declared)))
    for name in FAMILIES:
        module = _family(name)
        if module.matches(model):
            return _with_mixing(_seen_through(module.build(model)))
    raise AssertionError("the generic adapter matches every model")  # pragma: no cover


MIXING = "mixing_matrix"  # the protocol: attention.mixing_matrix(P) -> M, the matrix that mixes the tokens


def _with_mixing(found: Adapter) -> Adapter:
    """The adapter with each layer's ``mixing`` set where its block holds exactly one module with a
    ``mixing_matrix(P) -> M`` method (shaped attention αI + βP): κ(M) is reported and μ(A) uses it."""
    layers, owners = [], set()
    for spec in found.layers:
        try:
            block = found.model.get_submodule(spec.name)
        except AttributeError:
            block = None
        found_m = [] if block is None else [m for m in block.modules() if callable(getattr(m, MIXING, None))]
        if spec.probs is not None and len(found_m) == 1 and spec.mixing is None:
            spec = replace(spec, mixing=getattr(found_m[0], MIXING))
            owners.add(type(found_m[0]).__name__)
        layers.append(spec)
    if not owners:
        return found
    note = (
        f"M: the tokens are mixed by {'/'.join(sorted(owners))}.{MIXING}(P), not by P: κ(M) is reported "
        "beside κ(P), and μ(A) = κ(M)κ(A_l)κ(W_V)"
    )
    return replace(found, layers=tuple(layers), notes=(*found.notes, note))


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
