"""κ(X) of a saved sample, measured through condcli's own loading and capture (recorded in metadata.json)."""

from __future__ import annotations

from typing import Any

import torch

from condcli import spectra
from condcli.analysis.persample import distinct_rows, first_distinct
from condcli.capture import capture
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadedModel

LAMBDA = 10.0  # the paper's λ


def _band(values: torch.Tensor) -> dict[str, float | str]:
    """Median, p10 and p90; an infinite one (X exactly singular) is the string "inf" (JSON has no inf)."""
    finite = torch.where(torch.isinf(values), torch.finfo(values.dtype).max, values)
    q = torch.quantile(finite, torch.tensor([0.1, 0.5, 0.9], dtype=values.dtype))
    out: dict[str, float | str] = {}
    for key, v in zip(("p10", "median", "p90"), q.tolist(), strict=True):
        out[key] = "inf" if v == torch.finfo(values.dtype).max else v
    return {k: out[k] for k in ("median", "p10", "p90")}


def embedding_kappa(loaded: LoadedModel, batch: Batch, inputs: str) -> dict[str, Any]:
    """Median and p10–p90 of κ(X) and κ(X + λI_k) over the samples of ``batch``; where a sample's X repeats
    rows exactly (repeated tokens in a RoPE decoder, whose X carries no positions), also how many samples do
    and κ over their distinct rows (κ_distinct)."""
    cap = capture(loaded.adapter, batch, layers=[], probes=())
    mats = cap.samples()
    kappa = torch.stack([spectra.condition_number(x) for x in mats])
    shifted = torch.stack([spectra.shifted_condition_number(x, LAMBDA) for x in mats])
    out: dict[str, Any] = {
        "inputs": inputs,
        "samples": len(mats),
        "where": loaded.adapter.embedding.name,
        "kappa": _band(kappa),
        "lambda": LAMBDA,
        "kappa_shifted": _band(shifted),
    }
    repeated = [int(distinct_rows(x)) < x.shape[-2] for x in mats]
    if any(repeated):
        distinct = torch.stack([spectra.condition_number(first_distinct(x)) for x in mats])
        out |= {"samples_with_repeated_rows": sum(repeated), "kappa_distinct": _band(distinct)}
    return out
