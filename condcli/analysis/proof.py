"""Before the first reported number: the generic path's reading of Q/K/V, proven on the first batch.

:func:`prove_first_batch` runs the model once on the first batch of the stream and hands back the loaded
model with each generic layer marked ``generic (verified)`` or ``generic (unverified)``, a layer whose
reading the model contradicts refused (no numbers: :func:`condcli.capture.layer_set` leaves it out), and
notes saying so (:mod:`condcli.adapters.generic.verify`). Family and declared adapters pass unchanged.

:class:`InForward` proves the same on the capture's own first forward instead of one of its own
(docs/performance.md#the-proof-in-the-captures-forward): :func:`condcli.analysis.driver.drive` watches the
first batch's plain forward with it and settles it right after. The numbers that forward gave stand where
the proof changed no chosen layer's reading; else :class:`Reread` hands the proven model back, and the run
starts again on it (:meth:`condcli.analysis.runs.RunSetup.analyse`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from condcli.adapters.base import Adapter
from condcli.adapters.generic.verify import Proof, Site, judged, prove, sites, watching
from condcli.capture import layer_set
from condcli.inputs.batches import Batch
from condcli.loading.big_model import main_device
from condcli.loading.sources import LoadedModel
from condcli.reports.refusal import Refused, split


def prove_first_batch(
    loaded: LoadedModel, inputs: Iterable[Batch], layers: Sequence[int] | None = None
) -> LoadedModel:
    """``loaded`` with the readings of its chosen generic ``layers`` (None: all; negative counts from the end)
    proven on the first batch of ``inputs``; exit 2 where none of them can be proven. No layer chosen (the
    embedding alone): nothing to prove, and no forward spent on it."""
    chosen = _to_prove(loaded.adapter, layers)
    if chosen is None:
        return loaded
    batch = next(iter(inputs), None)
    if batch is None:
        return loaded
    return _apart(loaded, batch, chosen)


def _to_prove(adapter: Adapter, layers: Sequence[int] | None) -> set[int] | None:
    """The chosen layers, where one of them is read by the generic path; else None (nothing to prove)."""
    chosen = set(layer_set(adapter, layers))
    if not any(s.qkv_source.startswith("generic") for s in adapter.layers if s.index in chosen):
        return None
    return chosen


def _apart(loaded: LoadedModel, batch: Batch, chosen: set[int]) -> LoadedModel:
    """The proof on a forward of its own over ``batch``."""
    adapter = loaded.adapter
    model = adapter.model
    dtype = next(model.parameters()).dtype
    device = main_device(model)
    prepared = {
        k: v.to(device, dtype) if v.is_floating_point() else v.to(device) for k, v in batch.inputs.items()
    }
    proven, notes = prove(adapter, prepared, batch.size, chosen)
    return _proven(loaded, proven, notes, chosen)


def _proven(loaded: LoadedModel, proven: Adapter, notes: list[str], chosen: set[int]) -> LoadedModel:
    """``loaded`` with the proven adapter and its notes; exit 2 where no chosen layer could be proven."""
    if all(proven.layers[i].refused is not None for i in chosen):
        code, why = split(proven.layers[min(chosen)].refused or "")
        raise Refused(
            "qkv-unreadable" if code is None else code,  # type: ignore[arg-type]
            f"the generic reading of {type(loaded.adapter.model).__name__}'s Q/K/V could not be proven on "
            f"its first batch: {why}",
            "declare the model's layout in a TOML file passed as `adapter` (docs/guides/your-own-model.md)",
        )
    return replace(loaded, adapter=proven, notes=[*loaded.notes, *notes])


class Reread(Exception):
    """The proof changed a chosen layer's reading (another reading of its weights, or none): the numbers
    of the forward it watched do not stand; the run starts again on ``loaded``, proven."""

    def __init__(self, loaded: LoadedModel) -> None:
        super().__init__("the generic reading changed on proof: analyse again")
        self.loaded = loaded


@dataclass
class InForward:
    """The proof of ``loaded``'s generic readings of the ``chosen`` layers, pending: watched in the capture's
    own first plain forward (:meth:`watching`, where that forward runs eager attention), else run apart on the
    same batch; :meth:`settle` then gives the proven model."""

    loaded: LoadedModel
    chosen: set[int]
    todo: list[Site]
    proofs: dict[int, Proof] = field(default_factory=dict)
    watched: bool = False  # a capture's forward was watched
    settled: bool = False

    def watching(self, batch: int, on_judged: Callable[[], None]) -> AbstractContextManager[None]:
        """For :func:`condcli.capture.capture` (``proving``): the proof's hooks on that forward."""
        self.watched = True
        return watching(self.todo, batch, self.proofs, on_judged)

    def done(self) -> bool:
        """Every layer to prove judged: the capture's forward may stop."""
        return all(s.spec.index in self.proofs for s in self.todo)

    def settle(self, batch: Batch) -> LoadedModel:
        """The model proven on ``batch`` (its forward watched, else one of its own); :class:`Reread` where a
        chosen layer's reading is not the one the capture read; exit 2 where none could be proven."""
        if self.watched:
            adapter, notes = judged(self.loaded.adapter, self.todo, self.proofs, self.chosen)
            proven = _proven(self.loaded, adapter, notes, self.chosen)
        else:
            proven = _apart(self.loaded, batch, self.chosen)
        self.settled = True
        if changed(self.loaded.adapter, proven.adapter, self.chosen):
            raise Reread(proven)
        return proven


def in_forward(loaded: LoadedModel, layers: Sequence[int] | None) -> InForward | None:
    """The pending proof of ``loaded``'s chosen generic ``layers``; None where there is nothing to prove."""
    chosen = _to_prove(loaded.adapter, layers)
    if chosen is None:
        return None
    return InForward(loaded, chosen, sites(loaded.adapter, chosen))


def changed(before: Adapter, after: Adapter, chosen: Collection[int]) -> bool:
    """Whether the proof refused a chosen layer or chose another reading of its weights."""
    return any(
        after.layers[i].refused is not None or after.layers[i].weights is not before.layers[i].weights
        for i in chosen
    )


_PENDING: ContextVar[InForward | None] = ContextVar("condcli_pending_proof", default=None)


@contextmanager
def pending(proof: InForward | None) -> Iterator[None]:
    """While a runner runs, ``proof`` waits for :func:`condcli.analysis.driver.drive` to take it
    (:func:`pending_for`)."""
    token = _PENDING.set(proof)
    try:
        yield
    finally:
        _PENDING.reset(token)


def pending_for(loaded: LoadedModel) -> InForward | None:
    """The proof pending for this very ``loaded`` (taken: a later drive of the same run finds none)."""
    proof = _PENDING.get()
    if proof is None or proof.loaded is not loaded:
        return None
    _PENDING.set(None)
    return proof
