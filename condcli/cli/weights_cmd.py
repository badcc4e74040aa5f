"""``condcli weights [MODEL]``: every weight-only number — κ(E) and its spectrum, κ(lm_head), per layer κ of
W_Q, W_K, W_V, W_O whole and per head, and μ(LA)'s weight factor — without inputs or a forward."""

from __future__ import annotations

from typing import Annotated

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
    from condcli.cli.output import emit, outputs
    from condcli.cli.tables import stdout_console
    from condcli.cli.weights_table import render

    run.layer_choice()  # `layers` checked before any work
    fmt = o.plot_format(fmt)
    files = outputs("weights", out, None, run.input_paths(), fmt)  # before any work
    report = analyse_weights(run)
    emit(report.to_json(), files, as_json=run.as_json, render=lambda: render(stdout_console(), report, heads))
