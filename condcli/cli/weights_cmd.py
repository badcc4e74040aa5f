"""``condcli weights [MODEL]``: every weight-only number — κ(E) and its spectrum, κ(lm_head), per layer κ of
W_Q, W_K, W_V, W_O whole and per head, and μ(LA)'s weight factor — without inputs or a forward."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from condcli.cli import options as o
from condcli.cli.help_format import ANALYSIS
from condcli.cli.main import command

# the bundle's options that make sense without inputs (no images, text, λ, batches, devices or dtype: the
# weights are read as stored and every κ is float64)
TAKEN = ("model_args", "weights", "checkpoint", "adapter", "seed", "layers", "trust_remote_code", "as_json")

Heads = Annotated[
    bool, typer.Option("--heads", help="Also print each layer's per-head table.", rich_help_panel=ANALYSIS)
]


@command("weights")
@o.run_options(only=TAKEN)
def weights_command(
    run: o.RunOptions, heads: Heads = False, out: o.Out = None, fmt: o.Format = "png"
) -> None:
    """Weight-only condition numbers: the embedding table E, the output head, W_Q/W_K/W_V/W_O per layer and
    head. No inputs, no forward; a safetensors model folder is read tensor by tensor."""
    from condcli.analysis.weights import analyse_weights
    from condcli.cli.output import REPORT_FILES, OutputDir, json_writer
    from condcli.cli.tables import stdout_console
    from condcli.cli.weights_table import render
    from condcli.distributed import is_writer

    run.layer_choice()  # `layers` checked before any work
    fmt = o.plot_format(fmt)
    names = (*REPORT_FILES, f"embedding_table.{fmt}")
    target = OutputDir(out, names, run.input_paths()) if out is not None else None
    report = analyse_weights(run)
    data = report.to_json()
    if not is_writer():
        return
    written: list[Path] = []
    if target is not None:
        written = target.write(json_writer(data), _html(data), _plots(data, fmt))
    if run.as_json:
        import json

        print(json.dumps(data, indent=2))
    else:
        render(stdout_console(), report, heads)
    if written:
        import sys

        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)


def _plots(data: dict[str, Any], fmt: str) -> Callable[[Path], list[Path]]:
    def write(folder: Path) -> list[Path]:
        from condcli.plots.embedding_table import embedding_table_plots

        return embedding_table_plots(data, folder, fmt)

    return write


def _html(data: dict[str, Any]) -> Callable[[Path], list[Path]]:
    """report.html: the weights page (:mod:`condcli.html.sections_weights`), through the page shell."""

    def write(folder: Path) -> list[Path]:
        from condcli.html.sections_weights import weights_page

        path = folder / "report.html"
        path.write_text(weights_page(data), encoding="utf-8")
        return [path]

    return write
