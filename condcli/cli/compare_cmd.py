"""``condcli compare MODEL_A MODEL_B``: the same analysis of two models (or saved reports), side by side
with B/A ratios.

The work is :func:`condcli.gate.compare`'s; this command parses, calls and renders. The options given on the
command line are told apart from their defaults: a model compared with a saved report takes the rest from
the report (:mod:`condcli.gate.saved`).
"""

from __future__ import annotations

import typer

from condcli.cli import gate_options as g
from condcli.cli import options as o
from condcli.cli.gate_common import StatisticOption
from condcli.cli.main import command


@command("compare")
@o.run_options(model=False)
def compare_command(
    run: o.RunOptions,
    context: typer.Context,
    model_a: g.ModelA = None,
    model_b: g.ModelB = None,
    checkpoint_a: g.CheckpointA = None,
    statistic: StatisticOption = None,
    conditioned: g.CompareConditioned = False,
    out: g.CompareOut = None,
    csv: o.Csv = None,
) -> None:
    """Two models' κ and μ side by side on the same inputs, with B/A ratios; either may be a saved report.

    κ(X), κ(X + λ·I_k), κ(X + C) and every layer's κ and μ. A saved report (FILE.json, from --json or
    --out) is compared as a model is; a model compared with one runs with the report's seed, samples,
    dtype, layers, λ and conditioned forward unless given.
    """
    from condcli.cli.compare_table import render
    from condcli.cli.gate_common import warn
    from condcli.cli.output import emit, outputs
    from condcli.cli.tables import stdout_console
    from condcli.gate import plan_compare

    given = _given(context)
    plan = plan_compare(
        model_a,
        model_b,
        run=run,
        checkpoint_a=checkpoint_a,
        statistic=statistic,
        conditioned=conditioned if "conditioned" in given else None,
        given=given,
    )
    files = outputs("compare", out, csv, plan.reads)  # before any work
    report = plan.run(o.watch(not run.as_json))
    warn(report.warnings)
    emit(
        report.to_json(),
        files,
        as_json=run.as_json,
        render=lambda: render(stdout_console(), report, plan.saved_from),
    )


def _given(context: typer.Context) -> set[str]:
    """The parameters given on the command line (or from the environment), not left at their defaults."""
    chosen = ("COMMANDLINE", "ENVIRONMENT")
    sources = {p.name: context.get_parameter_source(p.name) for p in context.command.params if p.name}
    return {name for name, source in sources.items() if source is not None and source.name in chosen}
