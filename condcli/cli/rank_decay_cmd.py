"""``condcli rank-decay [MODEL]``: Linformer-style rank decay of every layer's attention probabilities P."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from condcli.cli import options as o
from condcli.cli.main import command

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

Index = Annotated[
    Optional[int],
    typer.Option(
        "--index",
        help="m: read c_m, the share of Σσ in the m largest singular values of P (from 1). "
        "Default: round(n/4) of each layer's n.",
        show_default=False,
    ),
]
Heads = Annotated[bool, typer.Option("--heads", help="Also print c_m, rank 90% and erank per head.")]
ConditionedLambda = Annotated[
    Optional[float],
    typer.Option(
        "--conditioned",
        metavar="λ",
        help="Also run the forward with X + λ·I_k fed to the blocks and show its rank decay side by side.",
        show_default=False,
    ),
]


@command("rank-decay")
def rank_decay_command(
    model: o.ModelArg = None,
    weights: o.Weights = "pretrained",
    checkpoint: o.Checkpoint = None,
    seed: o.Seed = 0,
    images: o.Images = None,
    text: o.Text = None,
    max_samples: o.MaxSamples = None,
    batch_size: o.BatchSize = 8,
    index: Index = None,
    heads: Heads = False,
    layers: o.Layers = "all",
    conditioned: ConditionedLambda = None,
    lam: o.Lambda = None,
    device: o.Device = "auto",
    dtype: o.Dtype = None,
    trust_remote_code: o.TrustRemoteCode = False,
    as_json: o.Json = False,
    out: o.Out = None,
    fmt: o.Format = "png",
) -> None:
    """Singular values and normalized cumulative spectra of P per layer, head and sample, with charts."""
    from condcli.analysis.common import resolve_lambda
    from condcli.analysis.rank_decay import RankDecayOptions, analyse_rank_decay
    from condcli.analysis.rank_layers import check_index
    from condcli.cli.output import OutputDir, emit
    from condcli.cli.progress import progress_bar
    from condcli.cli.rank_table import render
    from condcli.cli.tables import stdout_console
    from condcli.errors import UsageError
    from condcli.inputs import stream
    from condcli.project_config import resolve_model
    from condcli.sources import load

    check_index(index)
    chosen = o.parse_layers(layers)
    if chosen == []:
        raise UsageError("--layers none leaves no attention to analyse", "give all, or indices such as 0,-1")
    if conditioned is not None and lam is not None and conditioned != lam:
        raise UsageError(
            f"--conditioned {conditioned:g} and --lambda {lam:g} disagree",
            "give one λ: --conditioned λ sets both the conditioned forward and κ(X + λ·I_k)",
        )
    fmt = o.plot_format(fmt)
    target = OutputDir(out) if out is not None else None  # checked before any work
    spec = o.input_spec(images, text, max_samples, batch_size, seed)
    spec_text, model_from = resolve_model(model, Path.cwd() / "pyproject.toml")
    loaded = load(spec_text, o.load_options(weights, checkpoint, seed, device, dtype, trust_remote_code))
    lam_value = resolve_lambda(conditioned if conditioned is not None else lam, loaded.adapter)
    options = RankDecayOptions(
        lam=lam_value,
        conditioned=conditioned is not None,
        index=index,
        layers=chosen,
        heads=heads,
        seed=seed,
    )
    inputs = stream(loaded.preprocessing, spec)
    with progress_bar("rank-decay", inputs.expected, enabled=not as_json) as advance:
        report = analyse_rank_decay(loaded, inputs, options, model_from, advance)
    data = report.to_json()

    def plots(folder: Path) -> list[Path]:
        from condcli.plots import rank_decay_plots

        return rank_decay_plots(data, folder, fmt)

    emit(data, target, plots, as_json=as_json, render=lambda: render(stdout_console(), report))
