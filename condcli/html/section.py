"""A section of the HTML report, and the guard that turns an older or partial report into a note."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from condcli.reports.reading import Report, as_map, as_maps, lam_text

__all__ = [
    "Report",
    "Section",
    "as_map",
    "as_maps",
    "conditioned_note",
    "guarded",
    "lam_text",
    "missing",
    "notes_html",
    "notes_section",
]


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


def notes_html(report: Report) -> str:
    """The report's notes, one paragraph each."""
    notes = report.get("notes")
    items = [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []
    return "".join(f'<p class="note"><b>note:</b> {escape(n)}</p>' for n in items)


def notes_section(report: Report) -> list[Section]:
    """The report's notes as a section of their own ([] where it has none)."""
    notes = notes_html(report)
    return [Section("notes", "Notes", notes)] if notes else []


def conditioned_note(report: Report) -> str:
    """Why the conditioned forward was not run, where the report says so ("" otherwise)."""
    cf = as_map(report.get("conditioned_forward"))
    if not cf or cf.get("applied") or not cf.get("reason"):
        return ""
    what = escape(str(cf.get("conditioning", "")))
    return f'<p class="note">conditioned forward ({what}): not run — {escape(str(cf["reason"]))}</p>'
