"""``condcli spectrum [MODEL]``: κ(X), κ(X + λI_k), κ(X + C), spectra and per-layer κ and μ, with plots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from condcli.cli import options as o
from condcli.cli.main import command

Heads = Annotated[bool, typer.Option("--heads", help="Per-head μ(LA), the actual κ(LA) and μ(A) tables.")]
Conditioned = Annotated[
    bool,
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Also run the conditioned forward (X + λ·I_k fed to the blocks) and show its per-layer κ and μ.",
    ),
]


@command("spectrum")
def spectrum_command(
    model: o.ModelArg = None,
    weights: o.Weights = "pretrained",
    checkpoint: o.Checkpoint = None,
    seed: o.Seed = 0,
    images: o.Images = None,
    text: o.Text = None,
    max_samples: o.MaxSamples = None,
    batch_size: o.BatchSize = 8,
    lam: o.Lambda = None,
    layers: o.Layers = "all",
    heads: Heads = False,
    conditioned: Conditioned = True,
    device: o.Device = "auto",
    dtype: o.Dtype = None,
    trust_remote_code: o.TrustRemoteCode = False,
    as_json: o.Json = False,
    out: o.Out = None,
    fmt: o.Format = "png",
) -> None:
    """Singular spectra and condition numbers of X and of every layer, plain and conditioned."""
    from condcli.analysis.common import resolve_lambda
    from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
    from condcli.cli.output import OutputDir, emit
    from condcli.cli.progress import progress_bar
    from condcli.cli.spectrum_table import render
    from condcli.cli.tables import stdout_console
    from condcli.inputs import stream
    from condcli.project_config import resolve_model
    from condcli.sources import load

    chosen = o.parse_layers(layers)
    fmt = o.plot_format(fmt)
    target = OutputDir(out) if out is not None else None  # checked before any work
    spec = o.input_spec(images, text, max_samples, batch_size, seed)
    spec_text, model_from = resolve_model(model, Path.cwd() / "pyproject.toml")
    loaded = load(spec_text, o.load_options(weights, checkpoint, seed, device, dtype, trust_remote_code))
    lam_value = resolve_lambda(lam, loaded.adapter)
    inputs = stream(loaded.preprocessing, spec)
    options = SpectrumOptions(lam=lam_value, layers=chosen, heads=heads, conditioned=conditioned, seed=seed)
    with progress_bar("spectrum", inputs.expected, enabled=not as_json) as advance:
        report = analyse_spectrum(loaded, inputs, options, model_from, advance)
    data = report.to_json()

    def plots(folder: Path) -> list[Path]:
        from condcli.plots import spectrum_plots

        return spectrum_plots(data, folder, fmt)

    emit(data, target, plots, as_json=as_json, render=lambda: render(stdout_console(), report))
