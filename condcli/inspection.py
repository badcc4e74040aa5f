"""``condcli inspect``: what condcli found in a model, proven by capturing one batch (no spectra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from condcli.capture import LayerCapture, capture
from condcli.inputs import InputSpec, stream
from condcli.report import envelope
from condcli.sources import LoadedModel


@dataclass
class LayerFound:
    index: int
    name: str
    attention: str
    heads: int
    x_in: tuple[int, ...]  # per-sample shape (N, d)
    attn_in: tuple[int, ...]  # (G, n, c)
    probs: tuple[int, ...] | None  # (G, H, q, k)
    approximation: bool


def _shape(t: torch.Tensor | None) -> tuple[int, ...] | None:
    return None if t is None else tuple(t.shape[1:])


def inspect_model(loaded: LoadedModel, spec: InputSpec, model_from: str) -> dict[str, Any]:
    """Capture the first batch and describe what was seen, in the SPEC §7 envelope."""
    inputs = stream(loaded.preprocessing, spec)
    found: list[LayerFound] = []
    specs = {s.index: s for s in loaded.adapter.layers}

    def sink(layer: LayerCapture) -> None:
        s = specs[layer.index]
        x_in, attn_in = _shape(layer.x_in), _shape(layer.attn_in)
        assert x_in is not None and attn_in is not None
        found.append(
            LayerFound(
                s.index, s.name, s.attention, s.heads, x_in, attn_in, _shape(layer.probs), s.approximation
            )
        )

    first = next(iter(inputs))
    got = capture(loaded.adapter, first, sink=sink)
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
                "x_in_shape": list(f.x_in),
                "attn_input_shape": list(f.attn_in),
                "probs_shape": None if f.probs is None else list(f.probs),
                "approximation": f.approximation,
            }
            for f in sorted(found, key=lambda f: f.index)
        ],
        "notes": loaded.notes,
    }
