"""Sortable tables: cells show the CLI's rounding, ``data-value`` holds the full-precision number that
sorting and the hover title use; ⚠ and floor marks are explained in a footnote only where they occur.
Headers set their scripts ("κ(X_l)" with a subscript ℓ). Columns of the conditioned forward (headed
"… +10I") are folded behind a checkbox (no JS), so a table fits the page until a reader asks for them."""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from condcli.figures.labels import html_text
from condcli.html.numbers import WARN, floor_num, full, is_floor, num, rel_uncertainty, stat, to_float
from condcli.numbers import APPROX, measured

# The footnotes a mark refers to, shown under a table only where a cell carries that mark.
FOOTNOTES: dict[str, str] = {
    "floor": f'"≥ x {WARN}": only a floor. Some samples are below the capture dtype\'s resolution '
    "(σ_k ≤ tol), "
    "so their κ is the floor σ_1/tol, and this statistic could be larger: the true value is at least x.",
    "warn": f"{WARN}: some samples of this quantity were below the capture dtype's resolution; the value "
    "shown is a statistic over samples of which some are floors, not measurements.",
    "approx": f"{APPROX}: only the digits the capture supports. The capture's own rounding moves σ_k by up "
    "to tol = u·‖X‖_F (Weyl), so κ is uncertain by tol/σ_k, large near the floor (hover: full precision; "
    "JSON: rel_uncertainty).",
}


@dataclass(frozen=True)
class Cell:
    """One table cell: ``text`` as shown, ``value`` the full-precision number behind it (None: text only),
    ``marks`` the footnote keys it carries (see :data:`FOOTNOTES`), ``title`` an extra hover text, ``cls``
    CSS classes of the page's stylesheet (e.g. "pass", "fail")."""

    text: str
    value: float | None = None
    marks: tuple[str, ...] = ()
    title: str = ""
    cls: str = ""


def number(v: float | None, digits: int = 3) -> Cell:
    """A plain number cell."""
    return Cell(num(v, digits), v)


def agg_cell(agg: object, statistic: str = "median", below: int | None = 0) -> Cell:
    """A statistic of an aggregate as the CLI tables print it: "≥ x ⚠" where the statistic is only a floor,
    "x ⚠" where some samples were below resolution (``below`` or the aggregate's floor count), "—" where
    the aggregate is missing or null (not observable)."""
    if not isinstance(agg, Mapping):
        return Cell("—")
    v = stat(agg, statistic)
    if v is None:
        return Cell("—")
    if is_floor(agg, statistic):
        return Cell(f"{floor_num(v)} {WARN}", v, ("floor",))
    floors = to_float(agg.get("floor_count")) or 0
    shown = measured(v, rel_uncertainty(agg, statistic))
    approx = ("approx",) if shown.startswith(APPROX) else ()
    if below or floors:
        return Cell(f"{shown} {WARN}", v, ("warn", *approx))
    return Cell(shown, v, approx)


CONDITIONED_COLUMN = re.compile(r"\s\+\S*I$")  # "κ(X_l) +10I": a column of the conditioned forward


def _td(cell: Cell | str, folded: bool = False) -> str:
    fold = " folded" if folded else ""
    if isinstance(cell, str):
        text = html_text(cell)  # escaped, with σ_1, κ(X_l) set as subscripts (module names left alone)
        return f'<td class="{fold.strip()}">{text}</td>' if folded else f"<td>{text}</td>"
    title = cell.title or full(cell.value)
    attrs = ""
    classes = " ".join(c for c in ("num" if cell.value is not None else "", cell.cls, fold.strip()) if c)
    if cell.value is not None:
        attrs += f' data-value="{full(cell.value)}"'
    if classes:
        attrs += f' class="{escape(classes)}"'
    if title:
        attrs += f' title="{escape(title)}"'
    return f"<td{attrs}>{escape(cell.text)}</td>"


def marks(rows: Sequence[Sequence[Cell | str]]) -> list[str]:
    """The footnote marks the cells of ``rows`` carry, in order of first appearance."""
    used: list[str] = []
    for row in rows:
        for cell in row:
            if isinstance(cell, Cell):
                used += [m for m in cell.marks if m not in used]
    return used


def footnotes_html(used: Sequence[str], footnotes: Mapping[str, str] | None = None) -> str:
    """The footnotes of the marks ``used`` (``footnotes`` adds to or overrides :data:`FOOTNOTES`)."""
    notes = {**FOOTNOTES, **(footnotes or {})}
    return "".join(
        f'<p class="footnote">{html_text(notes[m])}</p>' for m in dict.fromkeys(used) if m in notes
    )


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell | str]],
    caption: str = "",
    table_id: str = "",
    footnotes: Mapping[str, str] | None = None,
    notes: bool = True,
    folded: Sequence[int] | None = None,
) -> str:
    """A sortable table (click a header; numbers sort on ``data-value``), with the footnotes of the marks
    its cells carry (``footnotes`` adds to or overrides :data:`FOOTNOTES`; ``notes=False``: none, for a
    caller that shows them once under several tables, see :func:`marks` and :func:`footnotes_html`).
    ``folded``: the indices of the columns hidden until a checkbox above the table shows them (default:
    the conditioned forward's, :data:`CONDITIONED_COLUMN`)."""
    if folded is None:
        folded = [i for i, c in enumerate(columns) if CONDITIONED_COLUMN.search(c)]
    hidden = set(folded)
    ident = f' id="{escape(table_id)}"' if table_id else ""
    fold = ' class="folded"'
    head = "".join(
        f'<th scope="col"{fold if i in hidden else ""}>{html_text(c)}</th>' for i, c in enumerate(columns)
    )
    body = "".join("<tr>" + "".join(_td(c, i in hidden) for i, c in enumerate(row)) + "</tr>" for row in rows)
    cap = f"<caption>{html_text(caption)}</caption>" if caption else ""
    foot = footnotes_html(marks(rows), footnotes) if notes else ""
    out = (
        f'<div class="table-wrap"><table class="sortable"{ident}>{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{foot}</div>"
    )
    if not hidden:
        return out
    box = "fold-" + (table_id or f"{zlib.crc32(chr(31).join(columns).encode()):08x}")
    names = ", ".join(columns[i] for i in sorted(hidden))
    return (
        f'<div class="foldable"><input type="checkbox" class="fold" id="{escape(box)}">'
        f'<label class="fold" for="{escape(box)}">show {len(hidden)} more column'
        f"{'s' if len(hidden) > 1 else ''}: {html_text(names)}</label>{out}</div>"
    )


def key_values(pairs: Sequence[tuple[str, Any]]) -> str:
    """A two-column definition list of (label, value) pairs, skipping None values."""
    items = "".join(
        f"<dt>{escape(label)}</dt><dd>{escape(str(value))}</dd>"
        for label, value in pairs
        if value is not None
    )
    return f'<dl class="kv">{items}</dl>'
