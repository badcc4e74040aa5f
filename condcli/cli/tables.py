"""Number formatting and the rich tables shared by the analysis commands."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterable

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from condcli.cli.flags import as_flags
from condcli.loading.big_model import describe as placed
from condcli.numbers import WARN, floor_num, measured
from condcli.reports.spectrum import InputsInfo, ModelInfo
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
        first, *rest = wrapped(as_flags(line), out.width, "note: ")
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
    out.print(markup, soft_wrap=False, overflow="fold")


def stdout_console(piped_width: int = 200) -> Console:
    """The console a command's tables and lines go to: the terminal's width; piped or captured, the width
    COLUMNS names, else ``piped_width`` (tables are not squeezed into 80 columns for a file). A text line
    longer than the width wraps at word boundaries."""
    out = Console()  # text lines wrap at word boundaries to the width
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        out = Console(width=piped_width)
    return out


def header(out: Console, model: ModelInfo, inputs: InputsInfo) -> None:
    say(
        out,
        f"[bold]{escape(model.spec)}[/] ({escape(model.model_from)}): {model.family}, {model.source}, "
        f"{escape(model.weights_label)}, {model.num_layers} layers",
    )
    if model.device_map is not None:  # spread over devices: where its modules are
        say(out, escape(f"device map {model.device_map['strategy']}: {placed(model.device_map['modules'])}"))
    skipped = f"; {inputs.skipped} unreadable file(s) skipped" if inputs.skipped else ""
    shape = f"up to {inputs.tokens} tokens × d {inputs.dim}"
    say(out, escape(f"inputs: {inputs.count} samples — {as_flags(inputs.description)}; {shape}{skipped}"))
