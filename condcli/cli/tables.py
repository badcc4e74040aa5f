"""Number formatting and the rich tables shared by the analysis commands."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from condcli.cli.flags import as_flags
from condcli.loading.big_model import describe as placed
from condcli.numbers import WARN, floor_num, measured
from condcli.reports.envelope import InputsInfo, ModelInfo
from condcli.reports.reading import counted
from condcli.spectra import Aggregate


def stat(a: Aggregate, statistic: str) -> str:
    """One statistic of ``a`` (median, min, max, mean): "≥ 3.1e+04 ⚠" where it is itself only a floor, else
    the digits its uncertainty supports ("≈9e+09", :func:`condcli.numbers.measured`)."""
    v = float(getattr(a, statistic))
    return f"{floor_num(v)} {WARN}" if a.is_floor(statistic) else measured(v, a.uncertainty(statistic))


def median(a: Aggregate | None, below: int | None = 0) -> str:
    """A median: "≥ 3.1e+04 ⚠" where it is a floor, else the digits its uncertainty supports, marked ⚠ when
    some samples were below the capture dtype's resolution."""
    if a is None:
        return "—"
    if a.is_floor("median"):
        return stat(a, "median")
    return stat(a, "median") + (f" {WARN}" if below or a.floor_count else "")


def notes(out: Console, lines: Iterable[str]) -> None:
    """A report's notes under its tables, each "note: …" with the parameters it names as flags; none under
    ``--quiet``."""
    from condcli.cli.quiet import QUIET

    if QUIET.get():
        return
    for line in lines:
        first, *rest = [as_flags(line)] if out.soft_wrap else wrapped(as_flags(line), out.width, "note: ")
        out.print(f"[yellow]note:[/] {escape(first)}")
        for more in rest:
            out.print(escape(more))


def wrapped(text: str, width: int, prefix: str = "") -> list[str]:
    """``text`` broken at word boundaries into lines of at most ``width`` cells (a word longer than the line
    stays whole), the first after ``prefix`` (returned without it), the others hanging under it."""
    hang = " " * cell_len(prefix)
    lines = textwrap.wrap(
        text,
        width=max(width, cell_len(prefix) + 20),
        initial_indent=prefix,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [lines[0][len(prefix) :], *lines[1:]] if lines else [""]


def say(out: Console, markup: str) -> None:
    """A header line in rich markup, wrapped at word boundaries to the console's width."""
    out.print(markup)  # the console's soft_wrap: wrapped at words, but not for a file


def stdout_console(piped_width: int = 200) -> Console:
    """The console a command's tables and lines go to: the terminal's width; piped or captured, the width
    COLUMNS names, else ``piped_width`` (tables are not squeezed into 80 columns for a file, and text lines
    are not broken). On a terminal or under COLUMNS a text line longer than the width wraps at words."""
    out = Console()  # text lines wrap at word boundaries to the width
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        out = Console(soft_wrap=True, width=piped_width)  # a file: one line per line, as ever
    return out


def header(out: Console, model: ModelInfo, inputs: InputsInfo, prefix: str = "") -> None:
    """The model and inputs lines above a command's tables (none under ``--quiet``: tables only)."""
    if quiet():
        return
    say(
        out,
        f"{prefix}[bold]{escape(model.spec)}[/] ({escape(model.model_from)}): {model.family}, "
        f"{model.source}, {escape(model.weights_label)}, {model.num_layers} layers",
    )
    if model.device_map is not None:  # spread over devices: where its modules are
        say(out, escape(f"device map {model.device_map['strategy']}: {placed(model.device_map['modules'])}"))
    skipped = f"; {inputs.skipped} unreadable file(s) skipped" if inputs.skipped else ""
    shape = f"up to {inputs.tokens} tokens × d {inputs.dim}"
    samples = counted(inputs.count, None)
    say(out, escape(f"inputs: {samples} — {as_flags(inputs.description)}; {shape}{skipped}"))


@dataclass
class Col:
    """One column of a table fitted to the terminal: ``rank`` 0 is always shown, else the highest rank goes
    first where the terminal is too narrow; ``wrap``: its cells may wrap at spaces (text, never a number)."""

    header: str
    cells: list[str]
    rank: int = 0
    wrap: bool = False


def _need(c: Col) -> int:
    def cells(x: str) -> int:
        text = Text.from_markup(x).plain
        return max((cell_len(w) for w in text.split()), default=0) if c.wrap else cell_len(text)

    words = max((cell_len(w) for w in c.header.split()), default=0)
    return max([words, *(cells(x) for x in c.cells)])


def _natural(c: Col) -> int:
    return max(cell_len(c.header), *(cell_len(Text.from_markup(x).plain) for x in c.cells))


def _widths(cols: Sequence[Col], width: int) -> list[int | None]:
    """Each column's width: rich's own where the table fits at its natural width, else each its need (widest
    number or word) and the cells left over shared out to the wrapping columns, those that then fit whole
    first."""
    if sum(_natural(c) + 3 for c in cols) + 1 <= width:
        return [None] * len(cols)
    widths = [_need(c) for c in cols]
    left = width - (sum(w + 3 for w in widths) + 1)
    for i in sorted(range(len(cols)), key=lambda i: _natural(cols[i]) - widths[i]):  # the shortest first
        extra = max(0, min(left, _natural(cols[i]) - widths[i])) if cols[i].wrap else 0
        widths[i] += extra
        left -= extra
    return list(widths)


def fits(cols: Sequence[Col], width: int) -> bool:
    """Whether ``cols`` fit ``width`` cells as one table, none of them cut."""
    return sum(_need(c) + 3 for c in cols) + 1 <= width


def fitted(cols: Sequence[Col], width: int, **table: Any) -> tuple[Table, list[Col]]:
    """A rich table of ``cols`` that fits ``width`` cells, dropping the highest-ranked columns until it does
    (never cutting a cell: each column is at least as wide as its widest number or word); and the dropped."""
    shown = list(cols)
    while not fits(shown, width) and any(c.rank for c in shown):
        shown.remove(max((c for c in shown if c.rank), key=lambda c: c.rank))
    out = Table(**table)
    for c, w in zip(shown, _widths(shown, width), strict=True):
        out.add_column(c.header, width=w, overflow="fold")
    for row in zip(*(c.cells for c in shown), strict=True):
        out.add_row(*row)
    return out, [c for c in cols if c not in shown]


def dropped_line(out: Console, dropped: Sequence[Col]) -> None:
    """A footnote naming the columns a narrow terminal left out (none under ``--quiet``)."""
    if dropped and not quiet():
        names = ", ".join(c.header for c in dropped)
        say(out, escape(f"left out at {out.width} columns: {names} (a wider terminal or --json shows them)."))


def quiet() -> bool:
    """Inside a ``--quiet`` command: tables only, no header lines or footnotes."""
    from condcli.cli.quiet import QUIET

    return QUIET.get()
