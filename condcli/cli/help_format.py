"""How ``--help`` reads: the option panels, flags shown as flags, prose without hard line breaks, and an
Examples epilog.

Every option names one of :data:`PANELS` (typer's ``rich_help_panel``). :class:`HelpCommand` and
:class:`HelpGroup` are the click classes of condcli's commands and of the app: a flag (``--heads``,
``--conditioned/--no-conditioned``) shows no value type, as it takes none. Imports typer's core only, so
that ``--help`` stays fast (no torch, no numpy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typer.core import TyperCommand, TyperGroup, TyperOption

MODEL, INPUTS, ANALYSIS, OUTPUT, EXECUTION = "Model", "Inputs", "Analysis", "Output", "Execution"
RULES = "Rules"  # check's gate rules (--max-kappa, …): a panel of their own, so that each long name fits
PANELS = (MODEL, INPUTS, ANALYSIS, RULES, OUTPUT, EXECUTION)
"""The panels of a command's --help, in the order they are listed."""


def prose(text: str) -> str:
    """A docstring as help: its paragraphs kept, the line breaks inside each one made spaces (typer's rich
    mode keeps them, and a line broken at 110 characters then wraps badly at 80)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    paragraphs = " ".join(line or "\n\n" for line in lines).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def examples(lines: Sequence[str]) -> str:
    """The Examples epilog: one command line per line (rich mode keeps single line breaks in an epilog)."""
    return "[bold]Examples[/]\n" + "\n".join(lines)


def _flags_without_type(params: Sequence[Any]) -> None:
    """A flag takes no value: show no ``<bool>`` type for it."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class HelpCommand(TyperCommand):
    """A condcli command: flags shown as flags (see the module docstring)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        _flags_without_type(params)
        return params


class HelpGroup(TyperGroup):
    """The condcli app: its own options' flags shown as flags (--version, --install-completion, …)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        _flags_without_type(params)
        return params
