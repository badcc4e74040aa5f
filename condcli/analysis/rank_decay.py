"""``condcli rank-decay``: the spectra of every layer's P, plain and with the embedding fix, streamed over
all batches (docs/math.md#rank-decay)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from condcli.analysis.common import Progress, embedding_notes, inputs_info, model_info, settings
from condcli.analysis.driver import Conditioned, Take, drive
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.rank_layers import RankAccumulator, check_index, check_index_fits, rank_result
from condcli.capture import LayerCapture, layer_set
from condcli.conditioning import Conditioning
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Batch, InputStream
from condcli.loading.sources import LoadedModel
from condcli.reports.rank import RankDecayReport
from condcli.reports.spectrum import ConditionedForward

if TYPE_CHECKING:
    from condcli.analysis.runs import RunOptions


@dataclass(frozen=True)
class RankDecayOptions:
    lam: float  # λ of κ(X + λI_k) in the embedding section (and of the conditioned forward, if asked)
    conditioned: bool = False  # also run the forward with X + λI_k fed to the blocks
    index: int | None = None  # m, counted from 1; None: round(n/4) per layer
    layers: Sequence[int] | None = None  # None: all layers
    heads: bool = False  # per-head detail
    seed: int = 0

    def __post_init__(self) -> None:
        """Checked here, once, for the CLI and the API alike (errors name the parameters)."""
        from condcli.analysis.common import check_lambda
        from condcli.errors import ParameterTypeError

        if self.index is not None and (isinstance(self.index, bool) or not isinstance(self.index, int)):
            raise ParameterTypeError(f"`index={self.index!r}` is not an integer", "e.g. `index=49`")
        check_index(self.index)
        if self.layers is not None and len(self.layers) == 0:
            raise UsageError(
                "`layers=none` leaves no attention to analyse", "give all, or indices such as 0,-1"
            )
        check_lambda(self.lam, "conditioned" if self.conditioned else "lam")

    @classmethod
    def of(
        cls, run: RunOptions, lam: float, index: int | None, conditioned: float | None, heads: bool
    ) -> RankDecayOptions:
        """The options of a run checked by :meth:`check_run`, once its model is loaded (``lam``: the
        loaded setup's λ) — what the CLI and the API both run."""
        return cls(
            lam=lam,
            conditioned=conditioned is not None,
            index=index,
            layers=run.layer_choice(),
            heads=heads,
            seed=run.seed,
        )

    @classmethod
    def check_run(cls, run: RunOptions, index: int | None, conditioned: float | None) -> RunOptions:
        """``run`` with the λ of a rank-decay run, every option checked before any work: ``conditioned``
        (the λ of the conditioned forward) sets κ(X + λ·I_k)'s λ too, so a different ``lam`` is refused.
        After loading, the run's options are ``cls(lam=setup.lam, …)``."""
        from condcli.analysis.common import check_lambda
        from condcli.errors import ParameterTypeError

        if conditioned is not None and (
            isinstance(conditioned, bool) or not isinstance(conditioned, (int, float))
        ):
            raise ParameterTypeError(
                f"`conditioned={conditioned!r}` is not a number", "e.g. `conditioned=10`"
            )
        lam = None if conditioned is None else check_lambda(conditioned, "conditioned")
        if lam is not None and run.lam is not None and lam != run.lam:
            raise UsageError(
                f"`conditioned={lam:g}` and `lam={run.lam:g}` disagree",
                "give one λ: `conditioned=λ` sets both the conditioned forward and κ(X + λ·I_k)",
            )
        given = lam if lam is not None else run.lam
        cls(
            lam=0.0 if given is None else given,
            conditioned=lam is not None,
            index=index,
            layers=run.layer_choice(),
        )
        return replace(run, lam=given)


def _observable(loaded: LoadedModel, chosen: list[int]) -> tuple[list[int], list[str]]:
    """The chosen layers whose P can be observed, and a note naming the others."""
    specs = loaded.adapter.layers
    keep = [i for i in chosen if specs[i].probs is not None]
    skipped = [i for i in chosen if specs[i].probs is None]
    if not keep:
        why = (specs[chosen[0]].probs_note or "").removeprefix("P cannot be observed: ") if chosen else ""
        raise InputError(
            f"the attention probabilities P of {loaded.spec} cannot be observed in the chosen layers"
            + (f" ({why.rstrip('.')})" if why else ""),
            "run 'condcli inspect' to see what was found; rank-decay needs P",
        )
    notes = []
    if skipped:
        notes.append(
            f"layers {', '.join(map(str, skipped))}: P cannot be observed there, so they are left out"
        )
    return keep, notes


def _conditioned(loaded: LoadedModel, options: RankDecayOptions) -> ConditionedForward:
    fix = Conditioning(options.lam)
    builtin = loaded.adapter.builtin
    if options.conditioned and builtin is not None:
        raise UsageError(
            f"`conditioned`: {loaded.spec} already adds {builtin.describe()} at X in its own forward, so its "
            "rank decay is already the conditioned one",
            "drop `conditioned=True`, or run rank-decay on its plain twin with `conditioned=True`",
        )
    if builtin is not None:
        return ConditionedForward(
            False,
            builtin.describe(),
            f"the model adds {builtin.describe()} at X itself: its forward is the conditioned one",
        )
    if not options.conditioned:
        return ConditionedForward(False, fix.describe(), "not asked for (`conditioned`)")
    return ConditionedForward(True, fix.describe(), None)


def _into(into: dict[int, RankAccumulator]) -> Take:
    """Each captured layer's P into its accumulator; a layer whose P did not come is refused by name."""

    def take(layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        if layer.probs is None:
            spec = into[layer.index].spec
            raise InputError(
                f"layer {layer.index} ({spec.name}): P cannot be observed: its attention ran but handed over "
                "no attention probabilities",
                "leave the layer out with `layers`, or run 'condcli inspect' to see what was found",
            )
        into[layer.index].add(layer.probs, lengths)

    return take


def analyse_rank_decay(
    loaded: LoadedModel,
    inputs: InputStream,
    options: RankDecayOptions,
    model_from: str,
    progress: Progress | None = None,
) -> RankDecayReport:
    """Stream every batch through the plain (and conditioned) forward, keeping the singular values of P."""
    check_index(options.index)
    adapter = loaded.adapter
    chosen, notes = _observable(loaded, layer_set(adapter, options.layers))
    cond = _conditioned(loaded, options)
    specs = adapter.layers
    plain = {i: RankAccumulator(specs[i], per_head=options.heads) for i in chosen}
    conditioned = (
        {i: RankAccumulator(specs[i], per_head=options.heads) for i in chosen} if cond.applied else {}
    )
    embedding = EmbeddingAccumulator(options.lam)
    batches = 0

    def first_fits(xs: list[torch.Tensor], batch: Batch) -> None:
        nonlocal batches
        batches += 1
        if batches == 1 and batch.lengths is None:  # every sample has the same n: say so before more work
            check_index_fits(options.index, plain)

    loaded = drive(
        loaded,
        inputs,
        embedding,
        layers=chosen,
        probes=("probs",),
        plain=_into(plain),
        conditioned=[Conditioned(Conditioning(options.lam), _into(conditioned))] if cond.applied else [],
        on_x=first_fits,
        progress=progress,
        shared=[plain, conditioned],
    )
    adapter = loaded.adapter  # as proven
    specs = adapter.layers
    emb = embedding.result(adapter)
    result = rank_result(plain, options.index)
    result_conditioned = rank_result(conditioned, options.index) if cond.applied else None
    notes = [*loaded.notes, *notes]
    ragged = [acc for acc in plain.values() if acc.n_min < acc.n]
    if ragged:
        acc = ragged[0]
        notes.append(
            f"samples have {acc.n_min}–{acc.n} tokens, so P has that many singular values: past a shorter "
            "sample's n its c_j counts as 1 (all of its mass), and rank 90% is out of its own n"
        )
    if any(specs[i].approximation for i in chosen):
        notes.append(
            "P is the model's Nyström approximation of softmax attention, not an exact softmax: its rank is "
            "bounded by the landmark count by construction"
        )
    notes += embedding_notes(emb, inputs.count)
    return RankDecayReport(
        model=model_info(loaded, model_from),
        inputs=inputs_info(loaded, inputs, embedding.tokens, embedding.dim),
        settings=settings(
            loaded, options.lam, options.seed, conditioned_forward=cond.applied, heads=options.heads
        ),
        embedding=emb,
        rank_decay=result,
        rank_decay_conditioned=result_conditioned,
        conditioned_forward=cond,
        notes=tuple(notes),
    )
