"""``condcli compare MODEL_A MODEL_B``: the same analysis of two models, side by side with B/A ratios.

The work is :func:`condcli.gate.compare`'s; this command parses, calls and renders.
"""

from __future__ import annotations

from condcli.cli import gate_options as g
from condcli.cli import options as o
from condcli.cli.gate_common import StatisticOption
from condcli.cli.main import command


@command("compare")
@o.run_options(model=False)
def compare_command(
    run: o.RunOptions,
    model_a: g.ModelA = None,
    model_b: g.ModelB = None,
    checkpoint_a: g.CheckpointA = None,
    statistic: StatisticOption = None,
    conditioned: g.CompareConditioned = False,
    out: g.CompareOut = None,
    csv: o.Csv = None,
) -> None:
    """Two models' κ and μ side by side on the same inputs, with B/A ratios.

    κ(X), κ(X + λ·I_k), κ(X + C) and every layer's κ and μ.
    """
    from condcli.cli.compare_table import render
    from condcli.cli.gate_common import warn
    from condcli.cli.output import emit, outputs
    from condcli.cli.tables import stdout_console
    from condcli.gate import plan_compare

    plan = plan_compare(
        model_a, model_b, run=run, checkpoint_a=checkpoint_a, statistic=statistic, conditioned=conditioned
    )
    files = outputs("compare", out, csv, plan.reads)  # before any work
    report = plan.run(o.watch(not run.as_json))
    warn(report.warnings)
    emit(report.to_json(), files, as_json=run.as_json, render=lambda: render(stdout_console(), report))
