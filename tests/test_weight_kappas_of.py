"""A whole model's weight κ at once (analysis.layers.weight_kappas_of, one SVD call per shape) against NumPy's
float64 SVD of every full projection and every head's slice, with grouped-query layers among them."""

from __future__ import annotations

import numpy as np
import torch

from condcli.adapters.base import HeadWeights
from condcli.analysis.layers import weight_kappas_of
from tests.helpers import np_kappa


def _weights(rng: np.random.Generator, d: int, heads: int, kv: int, dh: int) -> HeadWeights:
    def w(h: int) -> torch.Tensor:
        return torch.from_numpy(rng.standard_normal((h, d, dh)) * rng.uniform(0.01, 1.0, (1, 1, dh)))

    return HeadWeights(w(heads), w(kv), w(kv))


def _np_full(w: torch.Tensor) -> float:
    """κ of the d × (H·d_h) matrix with the heads side by side."""
    m = w.permute(1, 0, 2).reshape(w.shape[1], -1).numpy()
    return float(np_kappa(m))


def test_every_layers_kappas_match_numpy_whatever_the_shapes() -> None:
    rng = np.random.default_rng(0)
    layers = {
        0: _weights(rng, 24, 4, 4, 6),  # square full projections (24 × 24)
        3: _weights(rng, 24, 4, 2, 6),  # grouped-query: W_K, W_V 24 × 12
        5: _weights(rng, 24, 4, 4, 6),
        7: _weights(rng, 32, 2, 1, 8),  # another width
    }
    got = weight_kappas_of(layers)
    assert list(got) == list(layers)
    for i, w in layers.items():
        k = got[i]
        want = [_np_full(w.wq), _np_full(w.wk), _np_full(w.wv)]
        np.testing.assert_allclose([k.wq, k.wk, k.wv], want, rtol=1e-10)
        kv = (np.arange(w.heads) // (w.heads // w.kv_heads)).tolist()
        np.testing.assert_allclose(k.wq_heads, np_kappa(w.wq.numpy()), rtol=1e-9)
        np.testing.assert_allclose(k.wk_heads, np_kappa(w.wk.numpy())[kv], rtol=1e-9)
        np.testing.assert_allclose(k.wv_heads, np_kappa(w.wv.numpy())[kv], rtol=1e-9)
        assert k.kv_heads == w.kv_heads
