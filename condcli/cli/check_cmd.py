"""``condcli check [MODEL]``: a CI gate on a fresh analysis — limits on κ and μ, and a baseline.

The work is :func:`condcli.gate.check`'s; this command parses, calls and renders. Exit codes
(docs/math.md#cli): 0 every rule passes · 1 a rule failed or a metric regressed · 2 bad usage or input (also
a malformed config or baseline) · 3 internal error.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from condcli.cli import gate_options as g
from condcli.cli import options as o
from condcli.cli.gate_common import StatisticOption
from condcli.cli.main import EXIT_CHECK_FAILED, command


@command("check")
@o.run_options(
    defaults={"layers": None},
    help={
        "layers": "all, none, or 0,3,-1. Default: all when a layer rule is set, else the baseline's layers, "
        "else none."
    },
)
@g.gate_options
def check_command(
    run: o.RunOptions,
    limits: dict[str, float | None],
    statistic: StatisticOption = None,
    baseline: g.BaselineOpt = None,
    tolerance: g.Tolerance = None,
    junit: g.Junit = None,
    config: g.Config = None,
    conditioned: g.CheckConditioned = None,
    weights_only: g.WeightsOnly = False,
    out: g.CheckOut = None,
    csv: o.Csv = None,
) -> None:
    """Gate a model's conditioning in CI: exit 0 when every rule passes, 1 when one fails.

    Rules come from the options (one per gateable metric) and from \\[tool.condcli.check] in
    ./pyproject.toml (or --config FILE); the command line wins. Each is evaluated on a fresh analysis, on
    the --statistic over samples (default median) and, for layer rules, the worst analysed layer of the
    plain forward.
    """
    started = time.monotonic()  # JUnit's time: the whole run, loading the model included
    from condcli.cli.check_table import show
    from condcli.cli.gate_common import out_dir, warn
    from condcli.cli.output import report_json
    from condcli.distributed import is_writer
    from condcli.gate import plan_check
    from condcli.gate.junit import check_junit, check_junit_path, write_junit

    plan = plan_check(
        run,
        limits=limits,
        statistic=statistic,
        baseline=baseline,
        tolerance=tolerance,
        config=config,
        conditioned=conditioned,
        weights_only=weights_only,
    )
    if junit is not None:  # before reading anything: never over what the run reads
        check_junit_path(junit, plan.reads)
    files = out_dir(out, csv, plan.reads, junit)  # before any work
    report = plan.run(o.watch(not run.as_json))
    written: list[Path] = []
    if is_writer():  # torchrun: rank 0 alone writes
        if junit is not None:
            write_junit(junit, check_junit(report, elapsed_s=time.monotonic() - started))
            written.append(junit)
        written += files.write(report.to_json())
    warn(report.warnings)
    if run.as_json:  # the report through the one writer of report texts; stdout holds nothing else
        print(report_json(report.to_json()))
        if not report.passed:
            failed = ", ".join(c.title for c in report.checks if not c.passed)
            print(f"check failed: {failed}", file=sys.stderr)
    else:
        show(report, as_json=False)
    if written:
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    if not report.passed:
        raise typer.Exit(EXIT_CHECK_FAILED)
