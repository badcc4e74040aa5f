"""A section of the HTML report, and the guard that turns an older or partial report into a note."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

Report = Mapping[str, Any]


@dataclass(frozen=True)
class Section:
    """One part of the page: ``id`` (the anchor, unique in the page), ``title`` (plain text, escaped by the
    page), ``html`` (the body, already escaped markup)."""

    id: str
    title: str
    html: str


def missing(what: str) -> str:
    """The note that stands where a report lacks what a section or figure would show."""
    return f'<p class="missing">{escape(what)}: not in this report.</p>'


def guarded(section_id: str, title: str, build: Callable[[], str]) -> Section:
    """``build()`` as a section; a report of an older or partial schema that lacks a key or holds another
    shape (KeyError, TypeError, ValueError, IndexError, AttributeError) gives a note instead of a crash."""
    try:
        body = build()
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        body = missing(f"{title} (this report's layout differs: {type(err).__name__} {err})")
    return Section(section_id, title, body)
