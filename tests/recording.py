"""What the tests record themselves with their own forward hooks, and a count of the hooks left on a model."""

from __future__ import annotations

from torch import nn


def hook_count(model: nn.Module) -> int:
    """Forward hooks and forward pre-hooks on all of the model's modules."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
