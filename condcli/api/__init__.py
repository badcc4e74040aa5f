"""condcli in one call per command, on a MODEL string or an ``nn.Module`` in memory (docs/design.md#layers).

    import condcli
    report = condcli.spectrum("vit-plain", max_samples=8)
    report.to_pandas()["layers"]             # tidy tables (condcli[pandas])
    report                                   # in Jupyter: the HTML report inline
    condcli.check(report, rules={"max_kappa": 500})

Each call runs the library code its command runs (the CLI parses, calls the same functions and renders), so
the same inputs give the same report, byte for byte. ``model`` is anything the CLI takes as MODEL, or an
``nn.Module`` (with ``tokenizer=``/``processor=`` for a Hugging Face model's own preprocessing). ``inputs``:
a folder of images, a text file (one sample per line), a list of strings, a tensor batch or a dict of
tensors, or an iterable of batches (a DataLoader); None: the model's default inputs. Errors are
:mod:`condcli.errors` types whose one line names these parameters.

:func:`weights` is ``condcli weights``: κ of every weight matrix and of the embedding table, no inputs and
no forward pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from condcli.analysis.runs import RunOptions, RunSetup, Watch
from condcli.errors import ParameterTypeError, UsageError, a_type

if TYPE_CHECKING:
    from torch import nn

    from condcli.gate.report import CheckReport, CompareReport
    from condcli.reports.rank import RankDecayReport
    from condcli.reports.spectrum import SpectrumReport
    from condcli.reports.sweep import SweepReport
    from condcli.reports.weights import WeightsReport

__all__ = ["check", "compare", "rank_decay", "read_report", "schema", "spectrum", "sweep_lambda", "weights"]

Layers = str | Sequence[int] | None


def _is_module(model: Any) -> bool:
    from torch import nn

    return isinstance(model, nn.Module)


def _run(
    model: Any,
    inputs: Any,
    layers: Layers,
    lam: float | None,
    device: str,
    dtype: str | None,
    max_samples: int | None,
    batch_size: int,
    seed: int,
    options: Mapping[str, Any],
) -> tuple[RunOptions, Any]:
    """The run's :class:`RunOptions` (what the CLI's options make) and the inputs given as objects."""
    from condcli.api.live import layers_text, split_inputs

    _check_model(model, "model")
    paths, given = split_inputs(inputs)
    extra = dict(options)
    if isinstance(extra.get("model_args"), Mapping):  # {"depth": 2} as the CLI's key=value JSON literals
        import json

        extra["model_args"] = [f"{k}={json.dumps(v)}" for k, v in extra["model_args"].items()]
    known = {
        "model_args",
        "weights",
        "checkpoint",
        "adapter",
        "device_map",
        "max_memory",
        "trust_remote_code",
    }
    unknown = sorted(set(extra) - known)
    if unknown:
        raise UsageError(
            f"`{unknown[0]}` is not an option of this call", f"the options: {', '.join(sorted(known))}"
        )
    for name in ("checkpoint", "adapter"):
        if isinstance(extra.get(name), str):
            extra[name] = Path(extra[name])
    fields: dict[str, Any] = {**paths, **extra}
    run = RunOptions(
        model=None if model is None or _is_module(model) else str(model),
        layers=layers_text(layers),
        lam=lam,
        device=device,
        dtype=dtype,
        max_samples=max_samples,
        batch_size=batch_size,
        seed=seed,
        **fields,
    )
    return run, given


def _check_model(model: Any, param: str) -> None:
    """``model`` is None, a MODEL string (or path) or an ``nn.Module``: else a :class:`UsageError`."""
    import os

    if model is None or isinstance(model, (str, os.PathLike)) or _is_module(model):
        return
    raise ParameterTypeError(
        f"`{param}` is {a_type(model)}",
        "give a MODEL string (a sample, a folder, hf:ID, a timm name) or an nn.Module",
    )


def _check_report_or_model(value: Any, param: str) -> None:
    """``value`` is something check and compare read: a report (object, dict or report.json path), a MODEL
    string or an ``nn.Module``, or None."""
    import os

    from condcli.reports.views import ReportViews

    if value is None or isinstance(value, (str, os.PathLike, Mapping, ReportViews)) or _is_module(value):
        return
    raise ParameterTypeError(
        f"`{param}` is {a_type(value)}",
        "give a report (a report object, its dict or a report.json path), a MODEL string or an nn.Module",
    )


def _setup(model: Any, run: RunOptions, given: Any, tokenizer: Any, processor: Any) -> RunSetup:
    """The loaded model ready to analyse: ``model`` loaded as the CLI loads MODEL, or the module given."""
    from condcli.analysis.runs import setup_run
    from condcli.api.live import setup_module, stream_of, with_inputs

    if _is_module(model):
        setup = setup_module(model, run, tokenizer, processor, Watch())
    else:
        if tokenizer is not None or processor is not None:
            raise UsageError(
                "`tokenizer`/`processor` go with a model in memory",
                "a MODEL string uses the tokenizer or processor saved beside its weights",
            )
        setup = setup_run(run, watch=Watch())
    loaded = setup.loaded
    made = None if given is None else stream_of(given, lambda: loaded.preprocessing, run, lambda: loaded)
    return with_inputs(setup, made)


def spectrum(
    model: str | nn.Module | None = None,
    inputs: Any = None,
    *,
    layers: Layers = "all",
    lam: float | None = None,
    conditioned: bool = True,
    heads: bool = False,
    device: str = "auto",
    dtype: str | None = None,
    max_samples: int | None = None,
    batch_size: int = 8,
    seed: int = 0,
    tokenizer: Any = None,
    processor: Any = None,
    **options: Any,
) -> SpectrumReport:
    """``condcli spectrum``: κ(X), κ(X + λ·I_k), κ(X + C), the spectra, and per layer κ and μ (plain and,
    with ``conditioned``, the conditioned forward); ``heads``: per-head detail. ``options``: ``weights``,
    ``checkpoint``, ``adapter``, ``model_args``, ``device_map``, ``max_memory``, ``trust_remote_code``."""
    from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum

    run, given = _run(model, inputs, layers, lam, device, dtype, max_samples, batch_size, seed, options)
    chosen = run.layer_choice()
    setup = _setup(model, run, given, tokenizer, processor)
    spec = SpectrumOptions(lam=setup.lam, layers=chosen, heads=heads, conditioned=conditioned, seed=run.seed)
    return setup.analyse("spectrum", analyse_spectrum, spec)


def sweep_lambda(
    model: str | nn.Module | None = None,
    inputs: Any = None,
    *,
    value_range: tuple[float, float] | None = None,
    steps: int | None = None,
    lambdas: Sequence[float] | None = None,
    target_kappa: float = 2.0,
    layers: Layers = "none",
    lam: float | None = None,
    device: str = "auto",
    dtype: str | None = None,
    max_samples: int | None = None,
    batch_size: int = 8,
    seed: int = 0,
    tokenizer: Any = None,
    processor: Any = None,
    **options: Any,
) -> SweepReport:
    """``condcli sweep-lambda``: κ(X + λ·I_k) over ``lambdas`` or ``steps`` points of ``value_range`` (default
    the paper's grid 1…20), its bounds and the smallest λ whose median κ is ≤ ``target_kappa``; ``layers``:
    also follow κ(X_l) of these layers in the conditioned forward."""
    from dataclasses import replace

    from condcli.analysis.sweep import SweepOptions, analyse_sweep, sweep_layers

    run, given = _run(model, inputs, layers, lam, device, dtype, max_samples, batch_size, seed, options)
    asked = SweepOptions.asked(value_range, steps, lambdas, target_kappa, run.layer_choice(), run.seed)
    setup = _setup(model, run, given, tokenizer, processor)
    spec = replace(asked, layers=sweep_layers(setup.loaded, asked.layers), lam=setup.lam)
    return setup.analyse("sweep-lambda", analyse_sweep, spec)


def rank_decay(
    model: str | nn.Module | None = None,
    inputs: Any = None,
    *,
    index: int | None = None,
    heads: bool = False,
    conditioned: float | None = None,
    layers: Layers = "all",
    device: str = "auto",
    dtype: str | None = None,
    max_samples: int | None = None,
    batch_size: int = 8,
    seed: int = 0,
    tokenizer: Any = None,
    processor: Any = None,
    **options: Any,
) -> RankDecayReport:
    """``condcli rank-decay``: the singular values and cumulative spectra of P per layer (and head, with
    ``heads``); ``index``: m of c_m (default round(n/4) per layer); ``conditioned``: λ of a conditioned
    forward shown beside the plain one."""
    from condcli.analysis.rank_decay import RankDecayOptions, analyse_rank_decay

    run, given = _run(model, inputs, layers, None, device, dtype, max_samples, batch_size, seed, options)
    run = RankDecayOptions.check_run(run, index, conditioned)  # the options, checked before any work
    setup = _setup(model, run, given, tokenizer, processor)
    spec = RankDecayOptions.of(run, setup.lam, index, conditioned, heads)
    return setup.analyse("rank-decay", analyse_rank_decay, spec)


def _json_of(report: Any, param: str) -> dict[str, Any] | None:
    """A report given as an object (a fresh one, or :func:`read_report`'s) or a dict, as its JSON; None for a
    model."""
    from condcli.reports.views import ReportViews

    if isinstance(report, ReportViews):
        return report.to_json()
    if isinstance(report, Mapping):
        return dict(report)
    if isinstance(report, Path) or (isinstance(report, str) and report.endswith(".json")):
        found: dict[str, Any] = read_report(report).to_json()
        return found
    return None


def check(
    report_or_model: Any = None,
    *,
    rules: Mapping[str, float | None] | None = None,
    baseline: Any = None,
    tolerance: float | str | None = None,
    statistic: str | None = None,
    config: str | Path | None = None,
    conditioned: bool | None = None,
    inputs: Any = None,
    tokenizer: Any = None,
    processor: Any = None,
    **options: Any,
) -> CheckReport:
    """``condcli check``: gate a report (a fresh one, a saved one or its path) or a model on ``rules`` (rule →
    limit: ``max_kappa``, ``max_mu_la``, … :data:`condcli.reports.metrics.GATES`) and a ``baseline`` (a
    report, its JSON or its path) within ``tolerance``. ``report.passed`` says whether everything passed.
    ``options``: a run's (``max_samples``, ``layers``, ``lam``, …) where a model is analysed."""
    from condcli import gate
    from condcli.api.live import layers_text

    if "layers" in options:
        options["layers"] = layers_text(options["layers"])
    _check_report_or_model(report_or_model, "report_or_model")
    if baseline is not None and not isinstance(baseline, (str, Path, Mapping)):
        from condcli.reports.views import ReportViews

        if not isinstance(baseline, ReportViews):
            raise ParameterTypeError(
                f"`baseline` is {a_type(baseline)}", "give a report, its dict or a report.json path"
            )
    base = _json_of(baseline, "baseline") if baseline is not None else None
    given = _json_of(report_or_model, "report_or_model")
    where = Path(config) if config is not None else None
    common: dict[str, Any] = {
        "limits": rules,
        "statistic": statistic,
        "baseline": base if base is not None else baseline,
        "tolerance": tolerance,
        "config": where,
        "conditioned": conditioned,
    }
    if given is None and (_is_module(report_or_model) or inputs is not None):
        from condcli.gate.rules import LAYER_RULES

        layered = any(r in LAYER_RULES and v is not None for r, v in (rules or {}).items())
        defaults = {"layers": "all" if layered or base is not None else "none"}
        analysed = spectrum(
            report_or_model,
            inputs,
            conditioned=bool(conditioned),
            tokenizer=tokenizer,
            processor=processor,
            **{**defaults, **options},
        )
        given = analysed.to_json()
        options = {}
    return gate.check(given if given is not None else report_or_model, **common, **options)


def weights(
    model: str | nn.Module | None = None,
    *,
    layers: Layers = "all",
    seed: int = 0,
    **options: Any,
) -> WeightsReport:
    """``condcli weights``: κ(E) and the output head, and per layer κ(W_Q/W_K/W_V/W_O) whole and per head
    with μ(LA)'s weight factor — no inputs, no forward. A folder or hub snapshot of safetensors is read
    tensor by tensor; an ``nn.Module`` is read as it is. ``options``: ``weights``, ``checkpoint``,
    ``adapter``, ``model_args``, ``trust_remote_code``."""
    from condcli.analysis.weights import WeightsSource, analyse_weights, weights_report
    from condcli.reports.envelope import ModelInfo

    run, _ = _run(model, None, layers, None, "cpu", None, None, 8, seed, options)
    if not _is_module(model):
        return analyse_weights(run)
    setup = _setup(model, run, None, None, None)
    loaded = setup.loaded
    info = ModelInfo(
        loaded.spec, setup.model_from, loaded.family, loaded.source, loaded.weights, loaded.num_layers
    )
    source = WeightsSource(loaded.top or loaded.model, loaded.adapter, info, None, [])
    return weights_report(source, run.layer_choice())


def compare(
    a: Any = None,
    b: Any = None,
    *,
    checkpoint_a: str | Path | None = None,
    statistic: str | None = None,
    conditioned: bool | None = None,
    inputs: Any = None,
    **options: Any,
) -> CompareReport:
    """``condcli compare``: ``b`` against ``a`` (ratios B/A), each a MODEL string, a module in memory, or a
    report (object, JSON or path); ``b`` alone is compared with [tool.condcli] model (else the shipped
    sample ViT). ``conditioned``: also each plain model's conditioned forward (None: as a saved report on
    the other side has it, else not, as the CLI). ``options``: the runs' (``max_samples``, ``layers``,
    ``lam``, …)."""
    from condcli import gate
    from condcli.api.live import layers_text

    if "layers" in options:
        options["layers"] = layers_text(options["layers"])
    _check_report_or_model(a, "a")
    _check_report_or_model(b, "b")
    # a module, a report or inputs given as objects: each model side is analysed here, then compared as
    # reports; two MODEL strings go to gate.compare as the CLI's do
    mixed = inputs is not None or any(s is not None and not isinstance(s, str) for s in (a, b))
    sides = []
    for side, param in ((a, "a"), (b, "b")):
        found = _json_of(side, param)
        if found is None and mixed and side is not None:
            found = spectrum(side, inputs, conditioned=bool(conditioned), **options).to_json()
        sides.append(found if found is not None else side)
    run_opts = {} if all(isinstance(s, Mapping) for s in sides) else options
    where = None if checkpoint_a is None else Path(checkpoint_a)
    return gate.compare(
        sides[0], sides[1], checkpoint_a=where, statistic=statistic, conditioned=conditioned, **run_opts
    )


def read_report(path: str | Path) -> Any:
    """A saved report.json with the same methods as a fresh report (tables, page, plots, files)."""
    from condcli.reports.views import SavedReport

    return SavedReport.read(path)


def schema(command: str | None = None) -> dict[str, Any]:
    """The JSON Schema of ``command``'s report (all commands' where None)."""
    from condcli.reports.schema import schema_of

    return schema_of(command)
