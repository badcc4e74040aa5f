"""Number formatting and the rich tables shared by the analysis commands."""

from __future__ import annotations

from collections.abc import Iterable

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
        out.print(f"[yellow]note:[/] {escape(as_flags(line))}")


def stdout_console() -> Console:
    out = Console(soft_wrap=True)
    if not out.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        out = Console(soft_wrap=True, width=200)
    return out


def header(out: Console, model: ModelInfo, inputs: InputsInfo) -> None:
    out.print(
        f"[bold]{escape(model.spec)}[/] ({escape(model.model_from)}): {model.family}, {model.source}, "
        f"{escape(model.weights_label)}, {model.num_layers} layers"
    )
    if model.device_map is not None:  # spread over devices: where its modules are
        out.print(escape(f"device map {model.device_map['strategy']}: {placed(model.device_map['modules'])}"))
    skipped = f"; {inputs.skipped} unreadable file(s) skipped" if inputs.skipped else ""
    shape = f"up to {inputs.tokens} tokens × d {inputs.dim}"
    out.print(escape(f"inputs: {inputs.count} samples — {as_flags(inputs.description)}; {shape}{skipped}"))
