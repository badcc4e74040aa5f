"""``condcli compare MODEL_A MODEL_B``: the same analysis of two models, side by side with B/A ratios."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from condcli.cli import options as o
from condcli.cli.gate_common import StatisticOption
from condcli.cli.main import command

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

ModelA = Annotated[
    str, typer.Argument(metavar="MODEL_A", help="Model A, the reference (any MODEL form, see 'spectrum').")
]
ModelB = Annotated[
    str, typer.Argument(metavar="MODEL_B", help="Model B, compared against A (ratios are B/A).")
]
CompareOut = Annotated[
    Optional[Path],
    typer.Option("--out", help="Write the JSON report to report.json in this folder.", show_default=False),
]
CompareConditioned = Annotated[
    bool,
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Also run each plain model's conditioned forward (X + λ·I_k fed on) and compare it.",
    ),
]


@command("compare")
def compare_command(
    model_a: ModelA,
    model_b: ModelB,
    statistic: StatisticOption = None,
    weights: o.Weights = "pretrained",
    seed: o.Seed = 0,
    images: o.Images = None,
    text: o.Text = None,
    max_samples: o.MaxSamples = None,
    batch_size: o.BatchSize = 8,
    lam: o.Lambda = None,
    layers: o.Layers = "all",
    conditioned: CompareConditioned = False,
    device: o.Device = "auto",
    dtype: o.Dtype = None,
    trust_remote_code: o.TrustRemoteCode = False,
    as_json: o.Json = False,
    out: CompareOut = None,
) -> None:
    """Two models' κ and μ side by side on the same inputs, with B/A ratios.

    κ(X), κ(X + λ·I_k), κ(X + C) and every layer's κ and μ, e.g. condcli compare vit-plain vit-conditioned.
    """
    import gc

    from condcli.analysis.common import resolve_lambda
    from condcli.analysis.spectrum import SpectrumOptions
    from condcli.cli.compare_table import render
    from condcli.cli.gate_common import spectrum_of, warn
    from condcli.cli.output import OutputDir, emit
    from condcli.cli.tables import stdout_console
    from condcli.gate.compare import compare_reports
    from condcli.gate.config import DEFAULT_STATISTIC, check_statistic
    from condcli.gate.report import CompareReport
    from condcli.gate.rules import seen_key
    from condcli.report import SpectrumReport
    from condcli.sources import load

    stat = check_statistic(statistic, "--statistic") if statistic is not None else DEFAULT_STATISTIC
    chosen = o.parse_layers(layers)
    target = OutputDir(out) if out is not None else None  # checked before any work
    spec = o.input_spec(images, text, max_samples, batch_size, seed)
    load_options = o.load_options(weights, None, seed, device, dtype, trust_remote_code)
    reports: list[SpectrumReport] = []
    seen: list[str | None] = []
    for label, name in (("A", model_a), ("B", model_b)):
        loaded = load(name, load_options)
        lam_value = resolve_lambda(lam, loaded.adapter)
        seen.append(seen_key(loaded.adapter.builtin, lam_value))
        options = SpectrumOptions(lam=lam_value, layers=chosen, conditioned=conditioned, seed=seed)
        reports.append(
            spectrum_of(loaded, "command line", spec, options, f"compare {label}", progress=not as_json)
        )
        del loaded
        gc.collect()  # one model in memory at a time
    data_a, data_b = (r.to_json() for r in reports)
    rows, warnings = compare_reports(data_a, data_b, stat, seen[0], seen[1])
    report = CompareReport(reports[0], reports[1], stat, tuple(rows), tuple(warnings))
    warn(warnings)
    emit(
        report.to_json(),
        target,
        lambda folder: [],
        as_json=as_json,
        render=lambda: render(stdout_console(), report),
    )
