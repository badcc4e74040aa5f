"""condcli — spectral diagnostics for transformer embeddings.

The one-call API (:mod:`condcli.api`) is exported here lazily: ``import condcli`` loads nothing else (no
torch), and ``condcli.spectrum`` imports the API on first use.
"""

from __future__ import annotations

from typing import Any

from condcli.commands import COMMANDS

__version__ = "0.1.0"

# name → the module that defines it, imported on first access (module __getattr__, PEP 562): each command's
# one call from the command registry, and reading a saved report back
_LAZY = {c.api: "condcli.api" for c in COMMANDS if c.api is not None} | {"read_report": "condcli.api"}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'condcli' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
