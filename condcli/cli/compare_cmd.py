"""``condcli compare MODEL_A MODEL_B``: the same analysis of two models, side by side with B/A ratios."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from condcli.cli import options as o
from condcli.cli.gate_common import StatisticOption
from condcli.cli.main import command
from condcli.cli.output import path_option

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

ModelA = Annotated[
    Optional[str],
    typer.Argument(
        metavar="MODEL_A",
        help="Model A, the reference (any MODEL form, see 'spectrum'). Given alone, the one model is B and "
        "A is \\[tool.condcli] model in ./pyproject.toml (else the shipped sample ViT).",
        show_default=False,
    ),
]
ModelB = Annotated[
    Optional[str],
    typer.Argument(
        metavar="MODEL_B", help="Model B, compared against A (ratios are B/A).", show_default=False
    ),
]
CheckpointA = Annotated[
    Optional[Path],
    typer.Option(
        "--checkpoint-a",
        help="A state dict for A's architecture (--checkpoint is B's), e.g. two checkpoints of one model.",
        show_default=False,
    ),
]
CompareOut = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        help="Write the report into this folder: report.json and report.html (a self-contained page).",
        show_default=False,
        parser=path_option,
        metavar="<path>",
    ),
]
CompareConditioned = Annotated[
    bool,
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Also run each plain model's conditioned forward (X + λ·I_k fed on) and compare it.",
    ),
]


def _sides(
    run: o.RunOptions, first: str | None, second: str | None, checkpoint_a: Path | None
) -> list[o.RunOptions]:
    """The run options of A and B: ``MODEL_A MODEL_B``, or ``MODEL_B`` alone against
    ``[tool.condcli] model`` (else the shipped sample ViT); --checkpoint-a is A's, --checkpoint B's;
    --model-arg goes to each side that is a file.py:factory."""
    from dataclasses import replace

    from condcli.errors import UsageError
    from condcli.project_config import resolve_model
    from condcli.sources_factory import parse_factory

    a, b = (first, second) if second is not None else (None, first)
    runs = [replace(run, model=a, checkpoint=checkpoint_a), replace(run, model=b)]
    config = Path.cwd() / "pyproject.toml"
    (name_a, _), (name_b, _) = (resolve_model(r.model, config) for r in runs)
    factories = [parse_factory(name) is not None for name in (name_a, name_b)]
    if run.model_args and any(factories):  # --model-arg goes to the factory side(s)
        runs = [r if f else replace(r, model_args=None) for r, f in zip(runs, factories, strict=True)]
    if name_a == name_b and runs[0].checkpoint == runs[1].checkpoint:
        raise UsageError(
            f"A and B are both {name_a}" + (f" with --checkpoint {run.checkpoint}" if run.checkpoint else ""),
            "give MODEL_A MODEL_B, MODEL_B alone to compare it with [tool.condcli] model, or two "
            "checkpoints of one model with --checkpoint-a FILE --checkpoint FILE",
        )
    return runs


@command("compare")
@o.run_options(model=False)
def compare_command(
    run: o.RunOptions,
    model_a: ModelA = None,
    model_b: ModelB = None,
    checkpoint_a: CheckpointA = None,
    statistic: StatisticOption = None,
    conditioned: CompareConditioned = False,
    out: CompareOut = None,
) -> None:
    """Two models' κ and μ side by side on the same inputs, with B/A ratios.

    κ(X), κ(X + λ·I_k), κ(X + C) and every layer's κ and μ, e.g. condcli compare vit-plain vit-conditioned.
    """
    import gc

    from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
    from condcli.cli.compare_table import render
    from condcli.cli.gate_common import warn
    from condcli.cli.output import REPORT_FILES, OutputDir, emit
    from condcli.cli.tables import stdout_console
    from condcli.gate.compare import compare_reports
    from condcli.gate.config import DEFAULT_STATISTIC, check_statistic
    from condcli.gate.report import CompareReport
    from condcli.gate.rules import seen_key
    from condcli.report import SpectrumReport

    stat = check_statistic(statistic, "--statistic") if statistic is not None else DEFAULT_STATISTIC
    chosen = run.layer_choice()
    sides = _sides(run, model_a, model_b, checkpoint_a)
    inputs = [found for side in sides for found in side.input_paths()]
    target = OutputDir(out, REPORT_FILES, inputs) if out is not None else None  # before any work
    reports: list[SpectrumReport] = []
    seen: list[str | None] = []
    for label, side in zip("AB", sides, strict=True):
        setup = o.setup_run(side)
        seen.append(seen_key(setup.loaded.adapter.builtin, setup.lam))
        options = SpectrumOptions(lam=setup.lam, layers=chosen, conditioned=conditioned, seed=run.seed)
        reports.append(setup.analyse(f"compare {label}", analyse_spectrum, options))
        del setup
        gc.collect()  # one model in memory at a time
    data_a, data_b = (r.to_json() for r in reports)
    rows, warnings = compare_reports(data_a, data_b, stat, seen[0], seen[1])
    report = CompareReport(reports[0], reports[1], stat, tuple(rows), tuple(warnings))
    warn(warnings)
    emit(
        report.to_json(),
        target,
        lambda folder: [],
        as_json=run.as_json,
        render=lambda: render(stdout_console(), report),
    )
