"""κ(X) of a saved sample, measured through condcli's own loading and capture (recorded in metadata.json)."""

from __future__ import annotations

from typing import Any

import torch

from condcli import spectra
from condcli.capture import capture
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadedModel

LAMBDA = 10.0  # the paper's λ


def _band(values: torch.Tensor) -> dict[str, float]:
    q = torch.quantile(values, torch.tensor([0.1, 0.5, 0.9], dtype=values.dtype))
    return {"median": float(q[1]), "p10": float(q[0]), "p90": float(q[2])}


def embedding_kappa(loaded: LoadedModel, batch: Batch, inputs: str) -> dict[str, Any]:
    """Median and p10–p90 of κ(X) and κ(X + λI_k) over the samples of ``batch``."""
    cap = capture(loaded.adapter, batch, layers=[], probes=())
    mats = cap.samples()
    kappa = torch.stack([spectra.condition_number(x) for x in mats])
    shifted = torch.stack([spectra.shifted_condition_number(x, LAMBDA) for x in mats])
    return {
        "inputs": inputs,
        "samples": len(mats),
        "where": loaded.adapter.embedding.name,
        "kappa": _band(kappa),
        "lambda": LAMBDA,
        "kappa_shifted": _band(shifted),
    }
