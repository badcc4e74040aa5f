"""``compare`` as a library call: the same analysis of two models (or saved reports), side by side with B/A
ratios — no Typer.

    from condcli import gate
    report = gate.compare("vit-plain", "vit-conditioned", max_samples=2)
    [(row.key, row.ratio) for row in report.rows], report.to_json()

:func:`plan_compare` resolves the two sides and says what the runs read (``reads``); :meth:`ComparePlan.run`
analyses each model in turn (one in memory at a time). Errors name the parameters (`model_a`,
`checkpoint_a`); the CLI shows its arguments and flags.
"""

from __future__ import annotations

import gc
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from condcli.analysis.runs import Inputs, RunOptions, Watch, setup_run
from condcli.errors import InputError, UsageError
from condcli.gate.checking import Report, saved_analysis
from condcli.gate.config import DEFAULT_STATISTIC, check_statistic
from condcli.gate.metrics import ReportShapeError, Statistic, extract_metrics
from condcli.gate.report import CompareReport
from condcli.gate.saved import Adopted

Side = RunOptions | dict[str, Any]  # a model to analyse, or a saved report's analysis
PARAMS = ("model_a", "model_b")


def _read(side: str | Report | None, param: str) -> tuple[str | Report | None, str, bool]:
    """(a side as given, or the report a ``.json`` side names, read; how an error names it; read from a
    file)."""
    from condcli.gate.saved import is_report_path, read_report
    from condcli.outpaths import shown

    if not isinstance(side, str) or not is_report_path(side):
        return side, f"`{param}`", False
    where = f"`{param}` {shown(side)}"
    return read_report(Path(side.strip()).expanduser(), where), where, True


def _sides(
    run: RunOptions, first: str | Report | None, second: str | Report | None, checkpoint_a: Path | None
) -> list[Side]:
    """A and B: ``model_a model_b``, or ``model_b`` alone against ``[tool.condcli] model`` (else the
    shipped sample ViT); ``checkpoint_a`` is A's, ``checkpoint`` B's; ``model_args`` go to each side that
    is a file.py:factory. A saved report (a dict, or a .json file read here) is taken as it is."""
    from condcli.gate.baseline import spectrum_report
    from condcli.gate.saved import check_pair, check_schema
    from condcli.loading.factory import parse_factory
    from condcli.loading.project_config import resolve_model

    a, b = (first, second) if second is not None else (None, first)
    (a, where_a, file_a), (b, where_b, file_b) = _read(a, "model_a"), _read(b, "model_b")
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        check_pair(a, b, where_a, where_b)
    for side, where, from_file in ((a, where_a, file_a), (b, where_b, file_b)):
        if isinstance(side, Mapping) and from_file:  # its version and command first: the clearer line
            check_schema(spectrum_report(side, where, "report"), where)
    for side, weights, label in ((a, checkpoint_a, "checkpoint_a"), (b, run.checkpoint, "checkpoint")):
        if isinstance(side, Mapping) and weights is not None:
            raise UsageError(
                f"`{label}` gives {'A' if label == 'checkpoint_a' else 'B'}'s weights, and that side is a "
                "saved report",
                "drop it (a saved report runs no model)",
            )
    sides: list[Side] = [
        saved_analysis(a, "model_a", {})
        if isinstance(a, Mapping)
        else replace(run, model=a, checkpoint=checkpoint_a),
        saved_analysis(b, "model_b", {}) if isinstance(b, Mapping) else replace(run, model=b),
    ]
    runs = [side for side in sides if isinstance(side, RunOptions)]
    config = Path.cwd() / "pyproject.toml"
    names = [resolve_model(r.model, config)[0] for r in runs]
    factories = [parse_factory(name) is not None for name in names]
    if run.model_args and any(factories):  # model_args go to the factory side(s)
        fixed = iter(r if f else replace(r, model_args=None) for r, f in zip(runs, factories, strict=True))
        sides = [next(fixed) if isinstance(side, RunOptions) else side for side in sides]
    if len(runs) == 2 and names[0] == names[1] and runs[0].checkpoint == runs[1].checkpoint:
        raise UsageError(
            f"A and B are both {names[0]}"
            + (f" with `checkpoint={run.checkpoint}`" if run.checkpoint else ""),
            "give `model_a` `model_b`, `model_b` alone to compare it with [tool.condcli] model, or two "
            "checkpoints of one model with `checkpoint_a=FILE` `checkpoint=FILE`",
        )
    return sides


@dataclass(frozen=True)
class ComparePlan:
    """A comparison with both sides resolved; :meth:`run` does the work."""

    sides: tuple[Side, Side]  # A, B
    statistic: Statistic
    layers: list[int] | None  # None: every layer
    conditioned: bool  # also each plain model's conditioned forward
    reads: Inputs  # what the runs read: no output may overwrite one of them (:mod:`condcli.outpaths`)
    adopted: tuple[Adopted | None, Adopted | None] = (None, None)  # a model side's settings from the report
    saved_from: tuple[str | None, str | None] = (None, None)  # the file each saved report was read from

    def run(self, watch: Watch | None = None) -> CompareReport:
        """Analyse each model side in turn (``watch``: a progress bar, notes) and match the metrics."""
        from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
        from condcli.gate.matching import compare_reports
        from condcli.gate.rules import seen_key, seen_key_of
        from condcli.gate.saved import describe

        found: list[tuple[dict[str, Any], Any, str | None]] = []  # (JSON, SpectrumReport or None, seen key)
        for label, side, adopted in zip("AB", self.sides, self.adopted, strict=True):
            if not isinstance(side, RunOptions):
                found.append((side, None, seen_key_of(side)))
                continue
            setup = setup_run(side, watch=watch)
            layers, conditioned = self.layers, self.conditioned
            if adopted is not None:
                own = setup.loaded.adapter.builtin is not None  # keeps its own λ, as compare always does
                if watch is not None and watch.notes is not None and adopted.taken:
                    watch.notes([describe(adopted, side, label, own)])
                layers = adopted.layers_of(setup.loaded.num_layers, self.layers)
                conditioned = conditioned or adopted.conditioned
                if adopted.lam is not None and not own:
                    setup = replace(setup, lam=adopted.lam)
            seen = seen_key(setup.loaded.adapter.builtin, setup.lam)
            options = SpectrumOptions(lam=setup.lam, layers=layers, conditioned=conditioned, seed=side.seed)
            spectrum = setup.analyse(f"compare {label}", analyse_spectrum, options)
            found.append((spectrum.to_json(), spectrum, seen))
            del setup
            gc.collect()  # one model in memory at a time
        (a, spectrum_a, seen_a), (b, spectrum_b, seen_b) = found
        rows, warnings = compare_reports(a, b, self.statistic, seen_a, seen_b)
        return CompareReport(a, b, self.statistic, tuple(rows), tuple(warnings), (spectrum_a, spectrum_b))


def _given(run: RunOptions | None, options: Mapping[str, Any], given: Collection[str] | None) -> set[str]:
    """The run options the caller chose: ``given``, else the ``options`` passed, else the fields of ``run``
    that differ from their defaults."""
    names = {f.name for f in fields(RunOptions)} - {"model", "as_json"}
    if given is not None:
        return set(given) & names
    if run is None:
        return set(options)
    default = RunOptions()
    return {name for name in names if getattr(run, name) != getattr(default, name)}


def plan_compare(
    model_a: str | Report | None = None,
    model_b: str | Report | None = None,
    *,
    run: RunOptions | None = None,
    checkpoint_a: Path | None = None,
    statistic: str | None = None,
    conditioned: bool | None = None,
    given: Collection[str] | None = None,
    **options: Any,
) -> ComparePlan:
    """What :func:`compare` will do, checked before any work (see there). ``given``: the fields of ``run``
    the caller set (the CLI's options given); the rest may come from a saved report
    (:mod:`condcli.gate.saved`)."""
    from condcli.gate.saved import adopt

    if run is not None and options:
        raise UsageError(f"`{next(iter(options))}` was given beside a RunOptions", "set it in the RunOptions")
    base = run if run is not None else RunOptions(**options)
    chosen_options = _given(run, options, given) | ({"conditioned"} if conditioned is not None else set())
    stat = check_statistic(statistic, "`statistic`") if statistic is not None else DEFAULT_STATISTIC
    chosen = base.layer_choice()
    saved_from = tuple(
        s.strip() if isinstance(s, str) and _is_report(s) else None for s in _as_given(model_a, model_b)
    )
    sides = _sides(base, model_a, model_b, checkpoint_a)
    runs_given = sorted(chosen_options - {"conditioned"})
    if runs_given and not any(isinstance(side, RunOptions) for side in sides):
        raise UsageError(
            f"`{runs_given[0]}` is an option of a run, and both sides are saved reports", "drop it"
        )
    for side, param in zip(sides, PARAMS, strict=True):
        if not isinstance(side, RunOptions):
            try:
                extract_metrics(side, stat)
            except ReportShapeError as e:
                raise InputError(
                    f"`{param}`: {e.path} {e.problem}", "make one with: condcli spectrum --json > report.json"
                ) from None
    adopted: list[Adopted | None] = [None, None]
    saved = [i for i, side in enumerate(sides) if not isinstance(side, RunOptions)]
    if len(saved) == 1:  # one report, one model: the model runs with the report's settings
        i = saved[0]
        model, report = sides[1 - i], sides[i]
        assert isinstance(model, RunOptions) and not isinstance(report, RunOptions)
        source = f"{'AB'[i]}'s report" + (f" {saved_from[i]}" if saved_from[i] else "")
        sides[1 - i], adopted[1 - i] = adopt(model, report, chosen_options, source)
    reads = [found for side in sides if isinstance(side, RunOptions) for found in side.input_paths()]
    reads += [("`" + PARAMS[i] + "`", Path(f)) for i, f in enumerate(saved_from) if f is not None]
    return ComparePlan(
        (sides[0], sides[1]),
        stat,
        chosen,
        bool(conditioned),
        reads,
        (adopted[0], adopted[1]),
        (saved_from[0], saved_from[1]),
    )


def _is_report(text: str) -> bool:
    from condcli.gate.saved import is_report_path

    return is_report_path(text)


def _as_given(model_a: str | Report | None, model_b: str | Report | None) -> tuple[Any, Any]:
    """(A, B) as :func:`_sides` reads them: one side given alone is B."""
    return (model_a, model_b) if model_b is not None else (None, model_a)


def compare(
    model_a: str | Report | None = None,
    model_b: str | Report | None = None,
    *,
    checkpoint_a: Path | None = None,
    statistic: str | None = None,
    conditioned: bool | None = None,
    watch: Watch | None = None,
    **options: Any,
) -> CompareReport:
    """Compare ``model_b`` with ``model_a`` (ratios are B/A): each anything ``condcli compare`` takes as a
    MODEL, or a saved report's JSON; ``model_b`` alone is compared with [tool.condcli] model (else the
    shipped sample ViT); a side may also be a saved report's file (``"a.json"``). ``checkpoint_a``: A's
    state dict (``checkpoint`` is B's), e.g. two checkpoints of one model. ``statistic``: median (default),
    mean or max over samples. ``conditioned``: also each plain model's conditioned forward (None: as a saved
    report on the other side has it, else not). A model compared with a saved report runs with the report's
    settings where ``options`` do not say (:mod:`condcli.gate.saved`). ``options``: the runs'
    (``max_samples=2``, ``lam``, ``layers``, … the fields of :class:`~condcli.analysis.runs.RunOptions`).

    The report is what ``condcli compare --json`` prints (:meth:`CompareReport.to_json`).
    """
    plan = plan_compare(
        model_a, model_b, checkpoint_a=checkpoint_a, statistic=statistic, conditioned=conditioned, **options
    )
    return plan.run(watch)
