"""A setting of an HF config that a composite model keeps in a nested config (a vision tower's image size in
its ``vision_config``, mel bins in an ``encoder_config``): read by the adapters (a vision model's trial
forward) and by the input pipeline alike, so it lives below both."""

from __future__ import annotations

from typing import Any


def sub_configs(config: Any, prefer: tuple[str, ...] = ()) -> list[Any]:
    """The configs nested in ``config`` (a composite's ``vision_config``, ``encoder_config``, …), those named
    in ``prefer`` first, then the others, then theirs (two levels)."""
    from transformers import PreTrainedConfig

    def nested(parent: Any) -> list[tuple[str, Any]]:
        items = vars(parent).items() if hasattr(parent, "__dict__") else ()
        return [(k, v) for k, v in items if isinstance(v, PreTrainedConfig)]

    first = sorted(nested(config), key=lambda kv: prefer.index(kv[0]) if kv[0] in prefer else len(prefer))
    return [v for _, v in first] + [v for _, c in first for _, v in nested(c)]


def setting(config: Any, name: str, prefer: tuple[str, ...] = (), default: Any = None) -> Any:
    """``config.name``, else the value a nested config gives it (a composite model's mel bins sit in its
    ``encoder_config``, SAM's image size in its ``vision_config``), else ``default``; a value the config
    gives itself, even None, is its own."""
    if hasattr(config, name):
        return getattr(config, name)
    return next((getattr(c, name) for c in sub_configs(config, prefer) if hasattr(c, name)), default)
