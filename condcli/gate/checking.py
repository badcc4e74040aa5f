"""``check`` as a library call: gate a model, or a saved report, on limits and a baseline — no Typer.

    from condcli import gate
    report = gate.check("vit-plain", limits={"max_kappa": 200}, max_samples=2)
    report.passed, report.to_json()
    gate.check(json.loads(Path("report.json").read_text()), limits={"max_mu_la": 50})

:func:`plan_check` resolves what needs no model (the limits, the config, the baseline's path, the layers)
and says what the run reads (``reads``: an output must not overwrite one of them); :meth:`CheckPlan.run`
loads the baseline and the model, analyses it and evaluates the rules. ``condcli check`` makes the same two
calls, checking its output paths in between. Errors name the parameters (`max_kappa`, `layers=none`); the
CLI shows its flags.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from condcli.analysis.runs import Inputs, RunOptions, Watch, setup_run
from condcli.errors import InputError, UsageError
from condcli.gate import config as gate_config
from condcli.gate.baseline import MAKE_ONE, Baseline, baseline_of, load_baseline, spectrum_report
from condcli.gate.config import CheckConfig
from condcli.gate.metrics import ReportShapeError
from condcli.gate.report import CheckReport, analysis_of
from condcli.gate.rules import LAYER_RULES
from condcli.reports.metrics import GATES

Report = Mapping[str, Any]  # a saved report's JSON (``condcli spectrum --json``, or a check's)
NOTHING = f"nothing to check: give a rule ({', '.join(f'`{rule}=F`' for rule in GATES)}) or `baseline=FILE`"


def run_options(model: str | RunOptions | None, options: Mapping[str, Any], **defaults: Any) -> RunOptions:
    """``model`` with the run's ``options`` (fields of :class:`RunOptions`: ``max_samples=2``, …) over
    ``defaults``; a RunOptions given (the CLI's) is taken as it is."""
    if isinstance(model, RunOptions):
        if options:
            raise UsageError(
                f"`{next(iter(options))}` was given beside a RunOptions", "set it in the RunOptions"
            )
        return model
    return RunOptions(model=model, **{**defaults, **options})


def saved_analysis(report: Report, param: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The analysis a saved report holds (a check report's, less what the check added); a saved report
    runs nothing, so an option of a run beside it is refused."""
    if options:
        raise UsageError(
            f"`{next(iter(options))}` is an option of a run, and `{param}` is a saved report", "drop it"
        )
    return analysis_of(spectrum_report(report, f"`{param}`", "report"))


@dataclass(frozen=True)
class CheckPlan:
    """A check with what needs no model resolved; :meth:`run` does the work."""

    config: CheckConfig  # the limits, statistic, tolerance and the baseline file
    run_options: RunOptions | None  # the model to analyse; None: ``saved`` is checked
    saved: dict[str, Any] | None  # a saved report's analysis
    baseline: Report | None  # a baseline given as a report dict (else config.baseline, a file, or none)
    config_file: Path | None  # the ``config`` given (also where [tool.condcli] model is read)
    conditioned: bool | None  # None: when the baseline has its per-layer numbers
    reads: Inputs  # what the run reads: no output may overwrite one of them (:mod:`condcli.outpaths`)
    weights_only: bool = False  # gate the weights alone (`condcli weights`): no inputs, no forward

    def run(self, watch: Watch | None = None) -> CheckReport:
        """Load the baseline and the model, analyse it (``watch``: a progress bar, notes) and gate it."""
        from condcli.gate.rules import seen_key_of

        cfg = self.config
        if self.baseline is not None:
            base: Baseline | None = baseline_of(self.baseline, cfg.statistic)
        else:
            base = None if cfg.baseline is None else load_baseline(cfg.baseline, cfg.statistic)
        if self.saved is None and self.weights_only:
            return self._weights(self.run_options or RunOptions(layers=None))
        if self.saved is None:
            return self._analyse(self.run_options or RunOptions(layers=None), base, watch)
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            return self._report(self.saved, base, seen_key_of(self.saved), started=stamp, elapsed_s=0.0)
        except ReportShapeError as e:
            raise InputError(f"`model`: {e.path} {e.problem}", MAKE_ONE) from None

    def _analyse(self, run: RunOptions, base: Baseline | None, watch: Watch | None) -> CheckReport:
        from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
        from condcli.gate.rules import seen_key

        cfg = self.config
        setup = setup_run(run, config=self.config_file, watch=watch)
        loaded, lam = setup.loaded, setup.lam
        kappa_key = seen_key(loaded.adapter.builtin, lam)
        if "max_kappa" in cfg.limits and kappa_key is None:
            own = loaded.adapter.builtin.describe() if loaded.adapter.builtin else "its own shift"
            raise UsageError(
                f"`max_kappa` gates what the blocks see, and this model adds {own} at X itself: "
                f"`lam={lam:g}` would measure another shift",
                "drop `lam`",
            )
        chosen = run.layer_choice() if run.layers is not None else None
        if run.layers is None:  # all for a layer rule, else the baseline's layers this model has, else none
            rule = any(r in LAYER_RULES for r in cfg.limits)
            chosen = (
                None if rule else [i for i in (base.layer_indices() if base else []) if i < loaded.num_layers]
            )
        conditioned = self.conditioned
        if conditioned is None:
            conditioned = base is not None and base.has_conditioned_forward()
        options = SpectrumOptions(lam=lam, layers=chosen, conditioned=conditioned, seed=run.seed)
        started, stamp = time.monotonic(), datetime.now(timezone.utc).isoformat(timespec="seconds")
        spectrum = setup.analyse("check", analyse_spectrum, options)
        elapsed = time.monotonic() - started
        return self._report(
            spectrum.to_json(), base, kappa_key, spectrum=spectrum, started=stamp, elapsed_s=elapsed
        )

    def _weights(self, run: RunOptions) -> CheckReport:
        """The weights alone, as `condcli weights` reads them, gated on the weight rules."""
        from condcli.analysis.weights import analyse_weights

        started, stamp = time.monotonic(), datetime.now(timezone.utc).isoformat(timespec="seconds")
        data = analyse_weights(
            replace(run, layers="all" if run.layers is None else run.layers), self.config_file
        )
        data_json = data.to_json()
        data_json["weights_only"] = True
        return self._report(data_json, None, None, started=stamp, elapsed_s=time.monotonic() - started)

    def _report(
        self, data: dict[str, Any], base: Baseline | None, kappa_key: str | None, **run: Any
    ) -> CheckReport:
        """The rules' results plus, with a baseline, one result per compared metric and the warnings."""
        from condcli.gate.baseline import compare_baseline, context_warnings
        from condcli.gate.metrics import extract_metrics
        from condcli.gate.report import BaselineSummary
        from condcli.gate.rules import evaluate

        cfg = self.config
        results, warnings, summary = evaluate(data, cfg, kappa_key), [], None
        if base is not None:
            new = extract_metrics(data, cfg.statistic)
            found, lone = compare_baseline(base.metrics, new, cfg.tolerance, cfg.statistic, base.source)
            results += found
            warnings = context_warnings(base.report, data) + lone
            summary = BaselineSummary(
                path=None if base.path is None else str(base.path),
                model=base.model,
                version=base.version,
                tolerance=cfg.tolerance,
                compared=len(found),
                regressed=sum(not r.passed for r in found),
                improved=sum(r.improved for r in found),
            )
        return CheckReport(
            data=data,
            statistic=cfg.statistic,
            checks=tuple(results),
            baseline=summary,
            warnings=tuple(warnings),
            config_file=None if cfg.config_file is None else str(cfg.config_file),
            **run,
        )


def plan_check(
    model: str | Report | RunOptions | None = None,
    *,
    limits: Mapping[str, float | None] | None = None,
    statistic: str | None = None,
    baseline: Path | str | Report | None = None,
    tolerance: float | str | None = None,
    config: Path | None = None,
    conditioned: bool | None = None,
    cwd: Path | None = None,
    weights_only: bool = False,
    **options: Any,
) -> CheckPlan:
    """What :func:`check` will do, checked before any work (see there). ``weights_only``: gate the weights
    alone (rules on E, :data:`condcli.gate.rules.TABLE_RULES`), read as `condcli weights` reads them."""
    here = cwd or Path.cwd()
    saved = run = None
    if isinstance(model, Mapping):
        saved = saved_analysis(model, "model", options)
    else:
        run = run_options(model, options, layers=None)  # check's default: the layers the rules need
    unknown = sorted(set(limits or {}) - set(GATES))
    if unknown:
        raise UsageError(f"no rule is called {unknown[0]!r}", f"the rules: {', '.join(GATES)}")
    given = baseline if isinstance(baseline, Mapping) else None
    cli = {
        **{rule: (limits or {}).get(rule) for rule in GATES},
        "statistic": statistic,
        "baseline": None if given is not None else baseline,
        "tolerance": tolerance,
    }
    cfg = gate_config.resolve(cli, config, here, explicit=config is not None)
    if given is not None:
        cfg = replace(cfg, baseline=None)  # the report given wins over a file's baseline
    elif cfg.empty:
        where = cfg.config_file or here / "pyproject.toml"
        raise UsageError(NOTHING, f"or set them in [tool.condcli.check] of {where}")
    if weights_only:
        _check_weights_only(cfg, saved is not None, conditioned, run)
    reads: Inputs = []
    if run is not None and weights_only:
        reads = run.input_paths(config)
    elif run is not None:
        chosen = run.layer_choice() if run.layers is not None else None
        layer_rules = [r for r in cfg.limits if r in LAYER_RULES]
        if layer_rules and chosen == []:
            raise UsageError(
                f"`{layer_rules[0]}` needs layers, but `layers=none` analyses none", "drop `layers=none`"
            )
        reads = run.input_paths(config)
    if cfg.baseline is not None:
        reads.append(("`baseline`", cfg.baseline))
    return CheckPlan(cfg, run, saved, given, config, conditioned, reads, weights_only)


def _check_weights_only(
    cfg: CheckConfig, saved: bool, conditioned: bool | None, run: RunOptions | None
) -> None:
    """`weights_only` gates the weights alone: a rule or option that needs inputs or a forward is refused."""
    from condcli.gate.rules import TABLE_RULES

    if saved:
        raise UsageError(
            "`weights_only` reads a model's weights, and `model` is a saved report", "give a MODEL"
        )
    forward = [rule for rule in cfg.limits if rule not in TABLE_RULES]
    if forward:
        raise UsageError(
            f"`{forward[0]}` needs inputs and a forward, and `weights_only` runs none",
            f"gate the weights with {', '.join(f'`{r}`' for r in TABLE_RULES)}, or drop `weights_only`",
        )
    if not cfg.limits:
        raise UsageError(
            "`weights_only` gates the weights: give a weight rule",
            f"e.g. {', '.join(f'`{r}=F`' for r in TABLE_RULES)}",
        )
    if cfg.baseline is not None:
        raise UsageError("`baseline` compares a forward's metrics, and `weights_only` runs none", "drop one")
    if conditioned:
        raise UsageError("`conditioned` is a forward, and `weights_only` runs none", "drop one")
    forward_options = ("images", "text", "max_samples", "lam", "dtype", "device_map")
    given = [f for f in forward_options if run is not None and getattr(run, f) is not None]
    if given:
        raise UsageError(f"`{given[0]}` is for a forward, and `weights_only` runs none", f"drop `{given[0]}`")


def check(
    model: str | Report | RunOptions | None = None,
    *,
    limits: Mapping[str, float | None] | None = None,
    statistic: str | None = None,
    baseline: Path | str | Report | None = None,
    tolerance: float | str | None = None,
    config: Path | None = None,
    conditioned: bool | None = None,
    watch: Watch | None = None,
    weights_only: bool = False,
    **options: Any,
) -> CheckReport:
    """Gate ``model`` — anything ``condcli check`` takes as MODEL, or a saved report's JSON — on ``limits``
    (rule → limit: ``max_kappa``, ``max_mu_la``, … from :data:`condcli.reports.metrics.GATES`) and a
    ``baseline``
    (a report's path, or its JSON) within ``tolerance`` (10% or 0.1), on the ``statistic`` over samples
    (median, mean or max). ``config``: a pyproject.toml-style file whose [tool.condcli.check] sets what is
    not given here (default ./pyproject.toml). ``options``: the run's (``max_samples=2``, ``lam``,
    ``layers``, ``dtype``, … the fields of :class:`~condcli.analysis.runs.RunOptions`).

    The report is what ``condcli check --json`` prints (:meth:`CheckReport.to_json`); ``passed`` says
    whether every rule passed and no metric regressed.
    """
    plan = plan_check(
        model,
        limits=limits,
        statistic=statistic,
        baseline=baseline,
        tolerance=tolerance,
        config=config,
        conditioned=conditioned,
        weights_only=weights_only,
        **options,
    )
    return plan.run(watch)
