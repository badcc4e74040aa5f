"""Helpers the Hugging Face adapters share: recognising HF classes cheaply, module paths, P from outputs."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import torch
from torch import nn

from condcli.errors import InternalError


def is_hf(model: nn.Module) -> bool:
    """Cheap pre-check before importing any transformers module: is (the base of) ``model`` an HF class?"""
    if "transformers" not in sys.modules:
        return False
    return any(c.__module__.startswith("transformers.") for c in type(base_model(model)).__mro__)


def hf_class(module: str, name: str) -> type[nn.Module] | None:
    """``transformers.models.<module>.<name>``, or None where this transformers version lacks it."""
    try:
        cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    except (ImportError, AttributeError):
        return None
    return cls if isinstance(cls, type) else None


def is_hf_instance(model: nn.Module, module: str, name: str) -> bool:
    """``isinstance(base_model(model), hf_class(module, name))``, without importing that modeling module
    (a second or more for some) where no class of that name is among the base model's bases, as it then
    cannot be one."""
    base = base_model(model)
    if not any(c.__name__ == name for c in type(base).__mro__):
        return False
    cls = hf_class(module, name)
    return cls is not None and isinstance(base, cls)


def base_model(model: nn.Module) -> nn.Module:
    """The bare transformer under a task head (``model.base_model``; the model itself when it is bare)."""
    base = getattr(model, "base_model", model)
    return base if isinstance(base, nn.Module) else model


def module_path(root: nn.Module, target: nn.Module) -> str:
    """The dotted name of ``target`` inside ``root`` (what ``root.get_submodule`` takes)."""
    for name, module in root.named_modules():
        if module is target:
            return str(name)
    raise InternalError(f"{type(target).__name__} is not a submodule of {type(root).__name__}")


def attention_weights(args: tuple[Any, ...], kwargs: dict[str, Any], output: Any, batch: int) -> torch.Tensor:
    """P from a transformers 5.x attention module's ``(attn_output, attn_weights)`` → (B, 1, H, q, k)."""
    p = output[1] if isinstance(output, tuple | list) and len(output) > 1 else None
    if not isinstance(p, torch.Tensor):
        raise InternalError(
            "the attention module returned no attention probabilities",
            "this needs transformers 5.x with the eager attention implementation; report the model name",
        )
    return p.unsqueeze(1)
