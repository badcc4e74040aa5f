"""Before the first reported number: the generic path's reading of Q/K/V, proven on the first batch.

:func:`prove_first_batch` runs the model once on the first batch of the stream and hands back the loaded
model with each generic layer marked ``generic (verified)`` or ``generic (unverified)``, a layer whose
reading the model contradicts refused (no numbers: :func:`condcli.capture.layer_set` leaves it out), and
notes saying so (:mod:`condcli.adapters.generic.verify`). Family and declared adapters pass unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from condcli.adapters.generic.verify import prove
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
    adapter = loaded.adapter
    chosen = set(layer_set(adapter, layers))
    if not any(s.qkv_source.startswith("generic") for s in adapter.layers if s.index in chosen):
        return loaded
    batch = next(iter(inputs), None)
    if batch is None:
        return loaded
    model = adapter.model
    dtype = next(model.parameters()).dtype
    device = main_device(model)
    prepared = {
        k: v.to(device, dtype) if v.is_floating_point() else v.to(device) for k, v in batch.inputs.items()
    }
    proven, notes = prove(adapter, prepared, batch.size, chosen)
    if all(proven.layers[i].refused is not None for i in chosen):
        code, why = split(proven.layers[min(chosen)].refused or "")
        raise Refused(
            "qkv-unreadable" if code is None else code,  # type: ignore[arg-type]
            f"the generic reading of {type(model).__name__}'s Q/K/V could not be proven on its first batch: "
            f"{why}",
            "declare the model's layout in a TOML file passed as `adapter` (docs/guides/your-own-model.md)",
        )
    return replace(loaded, adapter=proven, notes=[*loaded.notes, *notes])
