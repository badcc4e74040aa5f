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


def as_map(value: object) -> Mapping[str, Any]:
    """``value`` where it is a JSON object, else {} (an older report may lack it or hold null)."""
    return value if isinstance(value, Mapping) else {}


def as_maps(value: object) -> list[Mapping[str, Any]]:
    """The JSON objects of a list (an absent or null list is empty)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def lam_text(report: Report) -> str:
    """The report's λ as the CLI prints it ("10"), or "λ" where the settings lack it."""
    lam = as_map(report.get("settings")).get("lambda")
    return f"{lam:g}" if isinstance(lam, (int, float)) and not isinstance(lam, bool) else "λ"


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
