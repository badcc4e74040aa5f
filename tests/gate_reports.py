"""Hand-made condcli report dicts (docs/math.md#json) for the CI gate's tests, with NumPy's statistics."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def agg(values: list[float]) -> dict[str, Any]:
    """An aggregate as the report writes it, with NumPy's statistics (docs/math.md#aggregation: inf as
    "inf")."""
    v = np.asarray(values, dtype=np.float64)

    def j(x: float) -> float | str:
        return "inf" if math.isinf(x) else float(x)

    return {
        "median": j(float(np.median(v))),
        "mean": j(float(np.mean(v))),
        "min": j(float(v.min())),
        "max": j(float(v.max())),
        "per_sample": [j(x) for x in values],
        "inf_count": int(np.isinf(v).sum()),
    }


def layer(index: int, kappa: list[float], mu_la: list[float], below_x: int = 0, below_a: int = 0) -> dict:
    return {
        "index": index,
        "name": f"blocks.{index}",
        "kappa_wq": 10.0,
        "kappa_wk": 20.0,
        "kappa_wv": 30.0,
        "kappa": agg(kappa),
        "kappa_attn_input": agg(kappa),
        "mu_la": agg(mu_la),
        "mu_a": None,  # not observable for this family
        "kappa_probs": None,
        "below_precision": {"x": below_x, "attn_input": below_a, "probs": None},
        "conditioned": None,
    }


def report(
    kappa: list[float],
    below: int = 0,
    layers: list[dict] | None = None,
    dtype: str = "float32",
    **extra: Any,
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "schema_version": 1,
        "tool": {"name": "condcli", "version": "0.1.0", "torch": "2.0"},
        "command": "spectrum",
        "model": {"spec": "m", "num_layers": 4},
        "inputs": {"kind": "synthetic", "count": len(kappa), "description": "d"},
        "settings": {"lambda": 10.0, "dtype": dtype, "device": "cpu", "seed": 0},
        "embedding": {
            "capture_dtype": dtype,
            "kappa": agg(kappa),
            "kappa_conditioned": agg([2.0] * len(kappa)),
            "kappa_corrected": agg([1.9] * len(kappa)),
            "below_precision": below,
        },
        "layers": layers or [],
    }
    r.update(extra)
    return r


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
