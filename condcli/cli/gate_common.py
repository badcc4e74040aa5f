"""What ``condcli check`` and ``condcli compare`` share: the --statistic option, one spectrum analysis of
a loaded model, and warnings on stderr."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from condcli.analysis.spectrum import SpectrumOptions
from condcli.inputs import InputSpec
from condcli.report import SpectrumReport
from condcli.sources import LoadedModel

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

StatisticOption = Annotated[
    Optional[str],
    typer.Option(
        "--statistic",
        help="Which statistic over samples to use: median (default), mean or max (the worst sample).",
        show_default=False,
    ),
]


def spectrum_of(
    loaded: LoadedModel,
    model_from: str,
    spec: InputSpec,
    options: SpectrumOptions,
    label: str,
    *,
    progress: bool,
) -> SpectrumReport:
    """The spectrum analysis of one model on its own preprocessing of ``spec``, with a progress bar."""
    from condcli.analysis.spectrum import analyse_spectrum
    from condcli.cli.progress import progress_bar
    from condcli.inputs import stream

    inputs = stream(loaded.preprocessing, spec)
    with progress_bar(label, inputs.expected, enabled=progress) as advance:
        return analyse_spectrum(loaded, inputs, options, model_from, advance)


def warn(lines: Iterable[str]) -> None:
    """Each line as ``warning: …`` on stderr (also with --json, whose stdout holds only the report)."""
    err = Console(stderr=True, soft_wrap=True)
    for line in lines:
        err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
