"""``condcli sweep-lambda``: κ(X + λI_k) over a λ grid, its bounds, and the smallest λ that meets a target.

One pass over the batches: per sample (padding removed) the exact κ(X + λI_k) for the whole grid through
the Gram update (:func:`condcli.spectra.shifted_condition_number`, SVD where the Gram path is not accurate
enough), then per λ the median and p10/p90 over samples. With chosen layers, one conditioned forward per λ
(X + λI_k fed to the blocks) and one plain forward give κ(X_l) per layer. Only per-sample scalars are kept,
so memory stays flat in the number of samples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from condcli.analysis.common import (
    Progress,
    embedding_notes,
    inputs_info,
    model_info,
    resolve_lambda,
    settings,
)
from condcli.analysis.driver import Conditioned, Take, drive
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.gather import Order, absorb, export
from condcli.analysis.persample import summarize_samples, trim
from condcli.capture import LayerCapture, layer_set
from condcli.conditioning import Conditioning
from condcli.errors import InternalError, UsageError
from condcli.inputs.batches import InputStream
from condcli.loading.sources import LoadedModel
from condcli.reports.sweep import SweepLayer, SweepReport, SweepResult
from condcli.spectra import (
    ScalarStream,
    shifted_condition_number,
    supplement_estimate,
    weyl_bound,
    weyl_lambda_for_target,
)

DEFAULT_RANGE = (1.0, 20.0)  # the paper's grid: λ = 1…20
DEFAULT_STEPS = 20
DEFAULT_TARGET = 2.0
# The most λ a grid may hold. The cost is one k×k eigvalsh per λ and sample (and, with layers, one more
# forward pass per λ and batch): 1000 points of a ViT-B already take about 5 s per sample on two cores.
MAX_GRID = 1000

Floats = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True)
class SweepOptions:
    lambdas: tuple[float, ...]  # the grid, ascending (see lambda_grid)
    target_kappa: float = DEFAULT_TARGET  # recommend the smallest λ whose median κ(X + λI_k) ≤ this
    layers: Sequence[int] | None = ()  # layers whose κ(X_l) to follow per λ; (): none, None: all
    seed: int = 0
    lam: float | None = None  # λ of the embedding section's κ(X + λI_k); None: the model's own, else 10

    def __post_init__(self) -> None:
        """Checked here, once, for the CLI and the API alike (errors name the parameters)."""
        from condcli.errors import ParameterTypeError

        if isinstance(self.target_kappa, bool) or not isinstance(self.target_kappa, (int, float)):
            raise ParameterTypeError(
                f"`target_kappa={self.target_kappa!r}` is not a number", "e.g. `target_kappa=2`"
            )
        object.__setattr__(self, "target_kappa", check_target(self.target_kappa))
        if not self.lambdas:
            raise UsageError("`lambdas` is empty", "e.g. `lambdas=1,2,5,10`")
        _check_lambdas(self.lambdas, "lambdas")

    @classmethod
    def asked(
        cls,
        value_range: tuple[float, float] | None,
        steps: int | None,
        lambdas: Sequence[float] | None,
        target_kappa: float,
        layers: Sequence[int] | None,
        seed: int = 0,
        lam: float | None = None,
    ) -> SweepOptions:
        """The options of a sweep as asked (the grid of ``value_range``/``steps`` or ``lambdas``), checked
        before any work; after loading, ``layers`` and ``lam`` become the model's (``replace``)."""
        from condcli.errors import ParameterTypeError

        numbers = [*(value_range or ()), *(lambdas or ())]
        if value_range is not None and (isinstance(value_range, str) or len(value_range) != 2):
            raise ParameterTypeError(
                f"`value_range={value_range!r}` is not two numbers", "e.g. `value_range=(1, 20)`"
            )
        if isinstance(lambdas, str) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers
        ):
            name = "lambdas" if lambdas is not None else "value_range"
            raise ParameterTypeError(
                f"`{name}` holds something other than numbers", "e.g. `lambdas=[1, 2, 5, 10]`"
            )
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)):
            raise ParameterTypeError(f"`steps={steps!r}` is not an integer", "e.g. `steps=20`")
        grid = lambda_grid(value_range, steps, None if lambdas is None else [float(v) for v in lambdas])
        return cls(lambdas=grid, target_kappa=target_kappa, layers=layers, seed=seed, lam=lam)


def _check_lambdas(values: Sequence[float], param: str) -> None:
    shown = (" " if param == "value_range" else ",").join(f"{v:g}" for v in values)
    if not all(math.isfinite(v) for v in values):
        example = "`value_range=1 20`" if param == "value_range" else "`lambdas=1,2,5,10`"
        raise UsageError(f"`{param}={shown}`: λ must be finite", f"e.g. {example}")
    if any(v < 0 for v in values):
        raise UsageError(f"`{param}={shown}`: λ must be ≥ 0", "the paper's shift is X + λ·I_k with λ ≥ 0")


def _check_size(n: int, param: str) -> None:
    """At most :data:`MAX_GRID` points: checked before the grid is built or any model is loaded."""
    if n > MAX_GRID:
        raise UsageError(
            f"`{param}` asks for {n} λ values; a sweep takes at most {MAX_GRID}",
            f"give at most {MAX_GRID}: each λ costs one eigvalsh per sample, and with `layers` a forward "
            "pass per batch",
        )


def lambda_grid(
    value_range: tuple[float, float] | None, steps: int | None, lambdas: Sequence[float] | None
) -> tuple[float, ...]:
    """The λ grid: ``steps`` points from LO to HI inclusive, or the given list sorted and de-duplicated.

    Neither: the paper's grid 1…20 (``steps`` points, 20 by default). Bad values raise :class:`UsageError`
    naming the parameter. At most :data:`MAX_GRID` points; −0 is read as 0.
    """
    if lambdas is not None:
        if value_range is not None:
            raise UsageError(
                "`value_range` and `lambdas` were both given",
                "give a range (`value_range=LO HI` [`steps=N`]) or a list (`lambdas=1,2,5,10`), not both",
            )
        if steps is not None:
            raise UsageError(
                "`steps` goes with `value_range`, not with `lambdas`", "drop `steps` or use `value_range`"
            )
        if not lambdas:
            raise UsageError("`lambdas` is empty", "e.g. `lambdas=1,2,5,10`")
        _check_lambdas(lambdas, "lambdas")
        given = sorted({float(v) + 0.0 for v in lambdas})
        _check_size(len(given), "lambdas")
        return tuple(given)
    n = DEFAULT_STEPS if steps is None else steps
    if n < 2:
        raise UsageError(
            f"`steps` must be at least 2, got {n}", "e.g. `steps=20` (for one λ use `lambdas=10`)"
        )
    _check_size(n, "steps")
    lo, hi = (
        DEFAULT_RANGE if value_range is None else (float(value_range[0]) + 0.0, float(value_range[1]) + 0.0)
    )
    _check_lambdas((lo, hi), "value_range")
    if not lo < hi:
        raise UsageError(
            f"`value_range={lo:g} {hi:g}`: LO must be smaller than HI",
            "e.g. `value_range=1 20` (for one λ: `lambdas=10`)",
        )
    grid = tuple(float(v) for v in np.linspace(lo, hi, n))
    if any(a >= b for a, b in itertools.pairwise(grid)):  # LO and HI a few float64 steps apart
        raise UsageError(
            f"`value_range={lo!r} {hi!r}` is too narrow for `steps={n}`: its points round to the same λ",
            "give fewer steps or a wider range",
        )
    return grid


def check_target(target: float) -> float:
    """``target_kappa`` must be a finite number > 1 (κ ≥ 1 always)."""
    if not (math.isfinite(target) and target > 1):
        raise UsageError(
            f"`target_kappa` must be a finite number > 1, got {target:g}",
            "κ ≥ 1 always; e.g. `target_kappa=2`",
        )
    return float(target)


def sweep_layers(loaded: LoadedModel, layers: Sequence[int] | None) -> list[int]:
    """The layers to follow (validated); refused on a model that conditions its own X."""
    if layers is not None and not layers:
        return []
    builtin = loaded.adapter.builtin
    if builtin is not None:
        raise UsageError(
            f"`layers`: this model adds {builtin.describe()} at X in its own forward, so its plain forward "
            "already is the conditioned one and there is no other λ to feed its blocks",
            "drop `layers` to sweep its X, or sweep its plain twin (e.g. vit-plain) with `layers`",
        )
    return layer_set(loaded.adapter, layers)


def percentiles(values: Floats, q: float) -> Floats:
    """np.percentile (linear) over axis 0, kept exact with ``inf``: between a and inf it is inf (not NaN)."""
    v = np.sort(values, axis=0)
    n = v.shape[0]
    pos = q / 100 * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    if np.isfinite(v).all():
        return np.asarray(np.percentile(v, q, axis=0), dtype=np.float64)
    a, b, t = v[lo], v[hi], pos - lo
    with np.errstate(invalid="ignore"):
        mixed = np.where(np.isinf(b), np.inf, a + (b - a) * t)
    return np.where((t == 0) | (a == b), a, mixed)


def _floats(t: torch.Tensor) -> Floats:
    return np.asarray(t.detach().to("cpu", torch.float64).numpy(), dtype=np.float64)


def shifted_kappas(xs: Sequence[torch.Tensor], grid: torch.Tensor) -> Floats:
    """κ(X + λI_k) of every sample for every λ: (S, L). Same-shape samples are computed together."""
    out = np.empty((len(xs), grid.numel()))
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, x in enumerate(xs):
        groups.setdefault(tuple(x.shape), []).append(i)
    for idx in groups.values():
        out[idx] = _floats(shifted_condition_number(torch.stack([xs[i] for i in idx]), grid))
    return out


class _LayerKappas:
    """κ(X_l) per sample of one layer: slot 0 the plain forward, slot j + 1 the forward at λ_j."""

    def __init__(self, slots: int) -> None:
        self.kappa = [ScalarStream() for _ in range(slots)]
        self.below = [0] * slots

    def add(self, slot: int, layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        if layer.x_in is None:
            raise InternalError(f"layer {layer.index}: X_l was not captured", "report it with the model name")
        s = summarize_samples(trim(layer.x_in, lengths, (0,)), layer.x_in.dtype)
        self.kappa[slot].extend(s.kappa)
        self.below[slot] += int(s.below.sum())

    def export_shard(self) -> dict[str, Any]:
        """This rank's per-sample κ(X_l) and counts (torchrun: :mod:`condcli.analysis.gather`)."""
        return {"kappa": [export(s) for s in self.kappa], "below": list(self.below)}

    def absorb_shards(self, parts: Sequence[dict[str, Any]], order: Order) -> None:
        """Every rank's :meth:`export_shard`, in sample order."""
        for j, s in enumerate(self.kappa):
            absorb(s, [p["kappa"][j] for p in parts], order, f"κ(X_l) slot {j}")
        self.below = [sum(p["below"][j] for p in parts) for j in range(len(self.below))]


def _into(into: dict[int, _LayerKappas], slot: int) -> Take:
    """Each captured layer's κ(X_l) into ``slot`` (0 the plain forward, j + 1 the one at λ_j)."""

    def take(layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        into[layer.index].add(slot, layer, lengths)

    return take


def recommendation(
    lambdas: Sequence[float], medians: Sequence[float], target: float, weyl_lambda: float
) -> tuple[float | None, str]:
    """The smallest grid λ whose median κ ≤ target (None: none in range) and one line saying so."""
    hits = [j for j, m in enumerate(medians) if m <= target]
    lo, hi = lambdas[0], lambdas[-1]
    if not hits:
        best = min(range(len(medians)), key=lambda j: medians[j])
        upper = max(2 * hi, math.ceil(weyl_lambda)) if math.isfinite(weyl_lambda) else 2 * hi
        return None, (
            f"none in range — no λ in [{lo:g}, {hi:g}] brings the median κ(X + λ·I_k) to ≤ {target:g} "
            f"(lowest {medians[best]:.3g} at λ = {lambdas[best]:g}); widen the range, e.g. "
            f"`value_range={lo:g} {upper:g}` — the Weyl bound guarantees κ ≤ {target:g} from "
            f"λ ≈ {weyl_lambda:.3g}"
        )
    j = hits[0]
    line = (
        f"λ = {lambdas[j]:g} — the smallest λ in the grid whose median κ(X + λ·I_k), "
        f"{medians[j]:.3g}, is ≤ {target:g}"
    )
    if j == 0 and lo > 0:
        line += (
            f"; it is the grid's first λ, so a smaller one may do too (e.g. `value_range={lo / 10:g} {hi:g}`)"
        )
    return lambdas[j], line


def analyse_sweep(
    loaded: LoadedModel,
    inputs: InputStream,
    options: SweepOptions,
    model_from: str,
    progress: Progress | None = None,
) -> SweepReport:
    """Stream every batch once: κ(X + λI_k) over the grid per sample, and κ(X_l) per λ for chosen layers."""
    adapter = loaded.adapter
    target = check_target(options.target_kappa)
    lambdas = tuple(options.lambdas)
    if not lambdas or list(lambdas) != sorted(set(lambdas)):
        raise InternalError("the λ grid must be ascending and de-duplicated", "build it with lambda_grid")
    grid = torch.tensor(lambdas, dtype=torch.float64)
    chosen = sweep_layers(loaded, options.layers)
    lam = resolve_lambda(options.lam, adapter)
    embedding = EmbeddingAccumulator(lam, spectra=False)
    per_layer = {i: _LayerKappas(len(lambdas) + 1) for i in chosen}
    kappa_rows: list[Floats] = []  # per sample (L,): per-sample scalars only
    loaded = drive(
        loaded,
        inputs,
        embedding,
        layers=chosen,
        probes=("x_in",),
        plain=_into(per_layer, 0),
        conditioned=[
            Conditioned(Conditioning(value), _into(per_layer, j + 1))
            for j, value in enumerate(lambdas if chosen else ())
        ],
        on_x=lambda xs, batch: kappa_rows.extend(shifted_kappas(xs, grid)),
        progress=progress,
        shared=[per_layer, kappa_rows],
    )
    adapter = loaded.adapter  # as proven
    emb = embedding.result(adapter)
    kappa = np.stack(kappa_rows)  # (S, L)
    sigma_max = torch.tensor(emb.sigma_max.per_sample, dtype=torch.float64)
    sigma_min = torch.tensor(emb.sigma_min.per_sample, dtype=torch.float64)
    median = percentiles(kappa, 50)
    weyl_lambda = float(np.median(_floats(weyl_lambda_for_target(sigma_max, target))))
    rec, line = recommendation(lambdas, median.tolist(), target, weyl_lambda)
    specs = {s.index: s for s in adapter.layers}
    layers = (
        tuple(
            SweepLayer(
                index=i,
                name=specs[i].name,
                kappa_median=tuple(s.result().median for s in per_layer[i].kappa[1:]),
                kappa_plain_median=per_layer[i].kappa[0].result().median,
                below_precision=tuple(per_layer[i].below[1:]),
                below_precision_plain=per_layer[i].below[0],
            )
            for i in chosen
        )
        if chosen
        else None
    )
    result = SweepResult(
        lambdas=lambdas,
        kappa_median=tuple(median.tolist()),
        kappa_p10=tuple(percentiles(kappa, 10).tolist()),
        kappa_p90=tuple(percentiles(kappa, 90).tolist()),
        kappa_inf_count=tuple(int(c) for c in np.isinf(kappa).sum(0)),
        weyl_bound=tuple(percentiles(_floats(weyl_bound(sigma_max, grid)), 50).tolist()),
        supplement_estimate=tuple(
            percentiles(_floats(supplement_estimate(sigma_max, sigma_min, grid)), 50).tolist()
        ),
        weyl_lambda_for_target=weyl_lambda,
        kappa_corrected=emb.kappa_corrected.median,
        kappa_plain=emb.kappa.median,
        recommended_lambda=rec,
        recommendation=line,
        target_kappa=target,
        layers=layers,
    )
    notes = list(loaded.notes)
    if adapter.builtin is not None:
        notes.append(
            f"X is taken before the model's own {adapter.builtin.describe()}: the sweep shifts the raw tokens"
        )
    notes += embedding_notes(emb, inputs.count)
    return SweepReport(
        model=model_info(loaded, model_from),
        inputs=inputs_info(loaded, inputs, embedding.tokens, embedding.dim),
        settings=settings(
            loaded, lam, options.seed, conditioned_forward=bool(chosen), heads=False, target_kappa=target
        ),
        embedding=emb,
        sweep=result,
        notes=tuple(notes),
    )
