"""``condcli inspect``: what condcli found in a model, proven by capturing one batch (no spectra)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from condcli.capture import LayerCapture, capture, layer_set
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadedModel
from condcli.reports.envelope import envelope


@dataclass
class LayerFound:
    index: int
    name: str
    attention: str
    heads: int
    x_in: tuple[int, ...] | None  # per-sample shape (N, d); None: the probe did not fire
    attn_in: tuple[int, ...] | None  # (G, n, c)
    probs: tuple[int, ...] | None  # (G, H, q, k); None: P cannot be observed
    approximation: bool
    probs_note: str | None  # why P cannot be observed


def _shape(t: torch.Tensor | None) -> tuple[int, ...] | None:
    return None if t is None else tuple(t.shape[1:])


def _list(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else list(shape)


def inspect_model(
    loaded: LoadedModel,
    spec: InputSpec,
    model_from: str,
    *,
    layers: Sequence[int] | None = None,
    lam: float | None = None,
) -> dict[str, Any]:
    """Capture the first batch and describe what was seen, in the docs/math.md#json envelope.

    ``layers``: the layers to capture and list (None: all). ``lam``: the λ an analysis of this model would
    use, recorded in the settings.
    """
    inputs = stream(loaded.preprocessing, spec)
    seen: dict[int, LayerCapture] = {}

    def sink(layer: LayerCapture) -> None:
        seen[layer.index] = layer

    first = next(iter(inputs))
    got = capture(loaded.adapter, first, layers=layers, sink=sink)
    # every chosen layer is listed, also one whose P cannot be observed (probs null, probs_note says why)
    found = [
        LayerFound(
            s.index,
            s.name,
            s.attention,
            s.heads,
            _shape(seen[s.index].x_in) if s.index in seen else None,
            _shape(seen[s.index].attn_in) if s.index in seen else None,
            _shape(seen[s.index].probs) if s.index in seen else None,
            s.approximation,
            s.probs_note,
        )
        for s in (loaded.adapter.layers[i] for i in layer_set(loaded.adapter, layers))
    ]
    tokens = [int(m.shape[0]) for m in got.samples()]
    point = loaded.adapter.embedding
    return {
        **envelope("inspect"),
        "model": {
            "spec": loaded.spec,
            "from": model_from,
            "family": loaded.family,
            "source": loaded.source,
            "weights": loaded.weights,
            "num_layers": loaded.num_layers,
            **({} if loaded.quantization is None else {"quantization": loaded.quantization.to_json()}),
        },
        "inputs": {
            "kind": inputs.kind,
            "description": inputs.description,
            "preprocessing": loaded.preprocessing.describe,
            "count": first.size,
            "tokens": max(tokens),  # N (the longest sample when text is padded)
            "tokens_per_sample": tokens,
            "dim": int(got.x.shape[-1]),
        },
        "settings": {
            "dtype": str(loaded.dtype).removeprefix("torch."),
            "device": str(loaded.device),
            "seed": spec.seed,
            **({} if lam is None else {"lambda": lam}),
        },
        "embedding": {
            "where": point.name,
            "description": point.description,
            "after_position_encoding": point.after_position_encoding,
            "model_conditioning": None
            if loaded.adapter.builtin is None
            else loaded.adapter.builtin.describe(),
        },
        "layers": [
            {
                "index": f.index,
                "name": f.name,
                "attention": f.attention,
                "heads": f.heads,
                "x_in_shape": _list(f.x_in),
                "attn_input_shape": _list(f.attn_in),
                "probs_shape": _list(f.probs),
                "approximation": f.approximation,
                "probs_note": f.probs_note,
            }
            for f in found
        ],
        "notes": loaded.notes,
    }
