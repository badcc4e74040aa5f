"""The HTML report: one self-contained page (inline CSS, plain JS, inline SVG, nothing external) drawn from
a parsed JSON report (docs/math.md#json) of any command, older schemas included. Like :mod:`condcli.plots`,
it reads only reports.

Each command's sections live in their own module, imported when a report of that command is rendered; a
module exposes ``sections(report) -> list[Section]``. Shared building blocks: :mod:`.page` (shell, compact
header, navigation), :mod:`.headline` (the κ(X) numbers in the header of every page with an embedding),
:mod:`.svg` (charts), :mod:`.tables` (sortable tables), :mod:`.glossary` (from the metric registry),
:mod:`.numbers` (:mod:`condcli.numbers`' rounding, shared with the CLI, and full-precision values).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from condcli.commands import COMMANDS
from condcli.errors import InputError
from condcli.html.section import Section

# command → module of its sections (imported lazily), from the command registry
SECTIONS: dict[str, str] = {c.name: c.sections for c in COMMANDS if c.sections is not None}


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page; :class:`InputError` where it is not a condcli report of a
    known command."""
    from condcli.html.glossary import glossary_section
    from condcli.html.page import page

    if not isinstance(report, Mapping):
        raise InputError("the report is not a JSON object", "pass the report.json a condcli command wrote")
    command = report.get("command")
    if not isinstance(command, str) or command not in SECTIONS:
        known = ", ".join(dict.fromkeys(SECTIONS))
        raise InputError(
            f"the report's command {command!r} has no HTML rendering",
            f"pass a report of one of: {known}",
        )
    module = importlib.import_module(SECTIONS[command])
    sections: list[Section] = list(module.sections(report))
    if not any(s.id == "glossary" for s in sections):
        glossary = glossary_section(report)
        if glossary is not None:
            sections.append(glossary)
    return page(report, sections)


__all__ = ["SECTIONS", "Section", "render_html"]
