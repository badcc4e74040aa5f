"""The page's interactive controls. They are shown only with JS on (class ``js-only``); without JS every
series and panel they would hide is simply shown."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from condcli.figures.labels import html_text, shown


def toggles(target: str, groups: Sequence[tuple[str, str]]) -> str:
    """Checkboxes that show or hide the elements with ``data-group`` = group inside element ``target``; a
    label's scripts set as on the rest of the page ("X + 10·I" with a subscript k)."""
    boxes = "".join(
        f'<label><input type="checkbox" checked data-toggle="{escape(g)}" data-target="{escape(target)}"> '
        f"{html_text(label)}</label>"
        for g, label in groups
    )
    return f'<div class="controls js-only">show: {boxes}</div>'


def picker(target: str, label: str, options: Sequence[tuple[str, str]], everything: str | None = None) -> str:
    """A select that shows only the child of element ``target`` whose ``data-pick`` is the chosen value
    (``everything``: an extra first option showing them all)."""
    opts = f'<option value="*">{escape(everything)}</option>' if everything else ""
    # an <option> holds text only: its scripts inline ("X_l" as "Xℓ"), never a "_"
    opts += "".join(f'<option value="{escape(v)}">{escape(shown(text))}</option>' for v, text in options)
    return (
        f'<div class="controls js-only"><label>{html_text(label)} '
        f'<select data-picker="{escape(target)}">{opts}</select></label></div>'
    )
