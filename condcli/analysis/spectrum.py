"""``condcli spectrum``: X, every chosen layer and the conditioned forward, streamed over all batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from condcli.analysis.common import Progress, embedding_notes, inputs_info, model_info, settings
from condcli.analysis.driver import Conditioned, Take, drive
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.embedding_table import embedding_table_of, table_modules
from condcli.analysis.layers import ForwardAccumulator, head_kappas, whole_kappas_of
from condcli.analysis.meanwhile import meanwhile
from condcli.analysis.proof import Reread
from condcli.capture import LayerCapture, layer_set
from condcli.conditioning import Conditioning
from condcli.inputs.batches import InputStream
from condcli.loading.sources import LoadedModel
from condcli.reports.spectrum import ConditionedForward, LayerReport, SpectrumReport, WeightKappas
from condcli.reports.table import EmbeddingTableReport


@dataclass(frozen=True)
class SpectrumOptions:
    lam: float  # λ of X + λI_k (see analysis.common.resolve_lambda)
    layers: Sequence[int] | None = None  # None: all layers; []: none
    heads: bool = False  # per-head μ and the actual κ(LA) per head
    conditioned: bool = True  # run the conditioned forward (X + λI_k fed on) beside the plain one
    seed: int = 0


def _conditioned_forward(
    loaded: LoadedModel, options: SpectrumOptions, chosen: list[int]
) -> ConditionedForward:
    fix = Conditioning(options.lam)
    builtin = loaded.adapter.builtin
    if builtin is not None:
        return ConditionedForward(
            False,
            builtin.describe(),
            f"the model adds {builtin.describe()} at X itself: its plain forward is the conditioned one",
        )
    if not options.conditioned:
        return ConditionedForward(False, fix.describe(), "not asked for")
    if not chosen:
        return ConditionedForward(False, fix.describe(), "no layers chosen (`layers=none`)")
    return ConditionedForward(True, fix.describe(), None)


def _into(into: dict[int, ForwardAccumulator]) -> Take:
    """Each captured layer into its accumulator."""

    def take(layer: LayerCapture, lengths: torch.Tensor | None) -> None:
        into[layer.index].add(layer, lengths)

    return take


def analyse_spectrum(
    loaded: LoadedModel,
    inputs: InputStream,
    options: SpectrumOptions,
    model_from: str,
    progress: Progress | None = None,
) -> SpectrumReport:
    """Stream every batch through the plain (and conditioned) forward and aggregate all of
    docs/math.md#spectra to #layers."""
    adapter = loaded.adapter
    chosen = layer_set(adapter, options.layers)
    specs = {s.index: s for s in adapter.layers}
    weights = {i: specs[i].weights() for i in chosen}
    heads = {i: head_kappas(weights[i]) for i in chosen}  # what the per-layer analysis reads
    # the model's constants only the report reads: beside the forward (every layer's full projections in
    # one SVD call, and κ(E))
    constants = meanwhile(
        lambda: (whole_kappas_of(weights), _embedding_table(loaded)), loaded.top or loaded.model
    )
    cond = _conditioned_forward(loaded, options, chosen)
    plain = {i: ForwardAccumulator(specs[i], weights[i], heads[i], per_head=options.heads) for i in chosen}
    conditioned = (
        {i: ForwardAccumulator(specs[i], weights[i], heads[i], per_head=False) for i in chosen}
        if cond.applied
        else {}
    )
    embedding = EmbeddingAccumulator(options.lam)
    try:
        loaded = drive(
            loaded,
            constants.started(inputs),
            embedding,
            layers=chosen,
            plain=_into(plain),
            conditioned=[Conditioned(Conditioning(options.lam), _into(conditioned))] if cond.applied else [],
            progress=progress,
            shared=[plain, conditioned],
        )
    except Reread:  # the run starts again on the model proven: these constants may be of another reading
        constants.discard()
        raise
    adapter = loaded.adapter
    specs = {s.index: s for s in adapter.layers}  # as proven: the reading each layer's numbers stand on
    emb = embedding.result(adapter)
    whole, table = constants.result()
    kappas = {i: WeightKappas(whole[i], heads[i], kv_heads=weights[i].kv_heads) for i in chosen}
    layers = tuple(
        LayerReport(
            index=i,
            name=specs[i].name,
            attention=specs[i].attention,
            causal=specs[i].causal,
            heads=specs[i].heads,
            approximation=specs[i].approximation,
            weights=kappas[i],
            plain=plain[i].stats(),
            heads_detail=plain[i].head_reports(),
            conditioned=conditioned[i].stats() if cond.applied else None,
            probs_note=specs[i].probs_note,
            entropy_heads=plain[i].entropy_heads(),
            sink_heads=plain[i].sink_heads(),
            qkv_source=specs[i].qkv_source,
        )
        for i in chosen
    )
    notes = list(loaded.notes)
    notes += embedding_notes(emb, inputs.count)
    return SpectrumReport(
        model=model_info(loaded, model_from),
        inputs=inputs_info(loaded, inputs, embedding.tokens, embedding.dim),
        settings=settings(
            loaded, options.lam, options.seed, conditioned_forward=cond.applied, heads=options.heads
        ),
        embedding=emb,
        layers=layers,
        conditioned_forward=cond,
        notes=tuple(notes),
        refused=_refused(loaded, options.layers),
        embedding_table=table,
    )


def _embedding_table(loaded: LoadedModel) -> EmbeddingTableReport | None:
    """κ(E) and the untied head's of the whole model; where a device map offloaded them (to CPU or disk),
    each is loaded back for the while, one module at a time (never the whole model)."""
    from contextlib import ExitStack

    import torch

    from condcli.loading.big_model import materialized

    top = loaded.top or loaded.model
    with ExitStack() as stack:
        for module in table_modules(top):
            stack.enter_context(materialized(module, torch.device("cpu")))
        return embedding_table_of(top)


def _refused(loaded: LoadedModel, layers: Sequence[int] | None) -> tuple[tuple[int, str, str], ...]:
    """The layers asked for whose generic Q/K/V reading failed its proof: (index, name, why) each."""
    count = len(loaded.adapter.layers)
    asked = set(range(count)) if layers is None else {i if i >= 0 else count + i for i in layers}
    return tuple(
        (s.index, s.name, s.refused) for s in loaded.adapter.layers if s.refused and s.index in asked
    )
