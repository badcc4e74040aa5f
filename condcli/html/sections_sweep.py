"""Sections of the page (work in progress)."""

from __future__ import annotations

from condcli.html.section import Report, Section


def sections(report: Report) -> list[Section]:
    """The sections of this command's page."""
    return []
