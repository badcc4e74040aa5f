"""``condcli check [MODEL]``: a CI gate on a fresh analysis — limits on κ and μ, and a baseline.

Exit codes (SPEC §8): 0 every rule passes · 1 a rule failed or a metric regressed · 2 bad usage or input
(also a malformed config or baseline) · 3 internal error.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from condcli.cli import options as o
from condcli.cli.gate_common import StatisticOption
from condcli.cli.gate_options import gate_options
from condcli.cli.main import EXIT_CHECK_FAILED, command
from condcli.cli.output import path_option
from condcli.metrics import GATES

if TYPE_CHECKING:
    from condcli.cli.output import OutputDir
    from condcli.gate.baseline import Baseline
    from condcli.gate.config import CheckConfig
    from condcli.gate.report import CheckReport, CheckResult
    from condcli.outpaths import Inputs
    from condcli.report import SpectrumReport

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

BaselineOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--baseline",
        help="A report from 'condcli spectrum --json > baseline.json': fail when a metric regresses past "
        "--tolerance (improvements never fail).",
        show_default=False,
    ),
]
Tolerance = Annotated[
    Optional[str],
    typer.Option(
        "--tolerance",
        help="Allowed regression against --baseline: a percentage (10%) or a fraction below 1 (0.1). "
        "Default 10%.",
        show_default=False,
    ),
]
Junit = Annotated[
    Optional[Path],
    typer.Option(
        "--junit",
        help="Also write JUnit XML here: one testcase per rule and per baseline metric.",
        show_default=False,
        parser=path_option,
        metavar="<path>",
    ),
]
Config = Annotated[
    Optional[Path],
    typer.Option(
        "--config",
        help="Read \\[tool.condcli.check] (and \\[tool.condcli] model) from this TOML file instead of "
        "./pyproject.toml. The command line wins over the file, key by key.",
        show_default=False,
    ),
]
CheckOut = Annotated[
    Optional[Path],
    typer.Option(
        "--out",
        help="Also write the report into this folder: report.json and report.html (a self-contained page).",
        show_default=False,
        parser=path_option,
        metavar="<path>",
    ),
]
CheckConditioned = Annotated[
    Optional[bool],
    typer.Option(
        "--conditioned/--no-conditioned",
        help="Run the conditioned forward too. Default: when the baseline has its per-layer numbers.",
        show_default=False,
    ),
]

NOTHING = (
    f"nothing to check: give a rule ({', '.join(f'{m.option} F' for m in GATES.values())}) or --baseline FILE"
)


@command("check")
@o.run_options(
    defaults={"layers": None},
    help={
        "layers": "all, none, or 0,3,-1. Default: all when a layer rule is set, else the baseline's layers, "
        "else none."
    },
)
@gate_options
def check_command(
    run: o.RunOptions,
    limits: dict[str, float | None],
    statistic: StatisticOption = None,
    baseline: BaselineOpt = None,
    tolerance: Tolerance = None,
    junit: Junit = None,
    config: Config = None,
    conditioned: CheckConditioned = None,
    out: CheckOut = None,
) -> None:
    """Gate a model's conditioning in CI: exit 0 when every rule passes, 1 when one fails.

    Rules come from the options (one per gateable metric) and from \\[tool.condcli.check] in
    ./pyproject.toml (or --config FILE); the command line wins. Each is evaluated on a fresh analysis, on
    the --statistic over samples (default median) and, for layer rules, the worst analysed layer of the
    plain forward.
    """
    from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
    from condcli.cli.gate_common import warn
    from condcli.cli.output import html_writer, json_writer
    from condcli.distributed import is_writer
    from condcli.errors import UsageError
    from condcli.gate import config as gate_config
    from condcli.gate.baseline import load_baseline
    from condcli.gate.junit import check_junit_path, write_junit
    from condcli.gate.rules import LAYER_RULES, evaluate, seen_key

    cwd = Path.cwd()
    cli = {
        **limits,  # one per gate of the metric registry, e.g. max_kappa, min_attention_entropy
        "statistic": statistic,
        "baseline": baseline,
        "tolerance": tolerance,
    }
    cfg = gate_config.resolve(cli, config, cwd, explicit=config is not None)
    if cfg.empty:
        where = cfg.config_file or cwd / "pyproject.toml"
        raise UsageError(NOTHING, f"or set them in [tool.condcli.check] of {where}")
    chosen = run.layer_choice() if run.layers is not None else None
    layer_rules = [r for r in cfg.limits if r in LAYER_RULES]
    if layer_rules and chosen == []:
        option = gate_config.LIMITS[layer_rules[0]]
        raise UsageError(f"{option} needs layers, but --layers none analyses none", "drop --layers none")
    read = run.input_paths(config) + ([("--baseline", cfg.baseline)] if cfg.baseline is not None else [])
    if junit is not None:  # before reading anything: never over what the run reads
        check_junit_path(junit, read)
    target = _out_dir(out, read, junit) if out is not None else None
    base = load_baseline(cfg.baseline, cfg.statistic) if cfg.baseline is not None else None
    setup = o.setup_run(run, config=config)
    loaded, lam_value = setup.loaded, setup.lam
    kappa_key = seen_key(loaded.adapter.builtin, lam_value)
    if "max_kappa" in cfg.limits and kappa_key is None:
        own = loaded.adapter.builtin.describe() if loaded.adapter.builtin else "its own shift"
        raise UsageError(
            f"--max-kappa gates what the blocks see, and this model adds {own} at X itself: "
            f"--lambda {lam_value:g} would measure another shift",
            "drop --lambda",
        )
    if run.layers is None:  # all for a layer rule, else the baseline's layers this model has, else none
        chosen = (
            None
            if layer_rules
            else [i for i in (base.layer_indices() if base else []) if i < loaded.num_layers]
        )
    if conditioned is None:
        conditioned = base is not None and base.has_conditioned_forward()
    options = SpectrumOptions(lam=lam_value, layers=chosen, conditioned=conditioned, seed=run.seed)
    started, stamp = time.monotonic(), datetime.now(timezone.utc).isoformat(timespec="seconds")
    spectrum = setup.analyse("check", analyse_spectrum, options)
    elapsed = time.monotonic() - started
    data = spectrum.to_json()
    report = _report(spectrum, data, cfg, evaluate(data, cfg, kappa_key), base)
    written: list[Path] = []
    if is_writer():  # torchrun: rank 0 alone writes
        if junit is not None:
            write_junit(junit, _junit(report, data, elapsed, stamp))
            written.append(junit)
        if target is not None:
            saved = report.to_json()
            written += target.write(json_writer(saved), html_writer(saved))
    warn(report.warnings)
    _print(report, run.as_json)
    if written:
        print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    if not report.passed:
        raise typer.Exit(EXIT_CHECK_FAILED)


def _out_dir(out: Path, read: Inputs, junit: Path | None) -> OutputDir:
    """The --out folder, checked before any work: never over what the run reads, nor the --junit file."""
    from condcli.cli.output import REPORT_FILES, OutputDir
    from condcli.errors import UsageError
    from condcli.outpaths import clash, shown

    target = OutputDir(out, REPORT_FILES, read)
    if junit is not None:
        for name in target.names:
            if clash(out / name, [("--junit", junit)]):
                raise UsageError(
                    f"--junit {shown(junit)} is {name} of --out {shown(out)}",
                    "give --junit a path outside --out, or another name",
                )
    return target


def _report(
    spectrum: SpectrumReport,
    data: dict[str, Any],
    cfg: CheckConfig,
    rules: list[CheckResult],
    base: Baseline | None,
) -> CheckReport:
    """The rules' results plus, with a baseline, one result per compared metric and the warnings."""
    from condcli.gate.baseline import compare_baseline, context_warnings
    from condcli.gate.metrics import extract_metrics
    from condcli.gate.report import BaselineSummary, CheckReport

    results, warnings, summary = list(rules), [], None
    if base is not None:
        new = extract_metrics(data, cfg.statistic)
        found, lone = compare_baseline(base.metrics, new, cfg.tolerance, cfg.statistic, str(base.path))
        results += found
        warnings = context_warnings(base.report, data) + lone
        summary = BaselineSummary(
            path=str(base.path),
            model=base.model,
            version=base.version,
            tolerance=cfg.tolerance,
            compared=len(found),
            regressed=sum(not r.passed for r in found),
            improved=sum(r.improved for r in found),
        )
    return CheckReport(
        spectrum=spectrum,
        statistic=cfg.statistic,
        checks=tuple(results),
        baseline=summary,
        warnings=tuple(warnings),
        config_file=None if cfg.config_file is None else str(cfg.config_file),
    )


def _junit(report: CheckReport, data: dict[str, Any], elapsed: float, stamp: str) -> bytes:
    from condcli.gate.junit import junit_xml

    s = report.spectrum
    properties = {
        "model": s.model.spec,
        "condcli": str(data["tool"]["version"]),
        "torch": str(data["tool"].get("torch", "")),
        "dtype": s.settings.dtype,
        "device": s.settings.device,
        "statistic": report.statistic,
    }
    return junit_xml(report.checks, properties, elapsed, stamp)


def _print(report: CheckReport, as_json: bool) -> None:
    """The JSON report (stdout holds nothing else; the failed checks go to stderr) or the tables."""
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
        if not report.passed:
            failed = ", ".join(c.title for c in report.checks if not c.passed)
            print(f"check failed: {failed}", file=sys.stderr)
        return
    from condcli.cli.check_table import render
    from condcli.cli.tables import stdout_console

    render(stdout_console(), report)
