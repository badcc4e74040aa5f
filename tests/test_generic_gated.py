"""ConViT's gated positional self-attention (GPSA) on the generic path: P is the content softmax
softmax(q kᵀ·scale), and the gated mix that passes through ``attn_drop`` and multiplies V is the layer's
mixing matrix M (shaped attention). Against the test's own references: P as a float64 recomputation from
the ``qk`` weights and the attention's input (hooked), M as the model's own tensor at ``attn_drop``, and
κ(P), κ(M) in the spectrum report as float64 NumPy of those two."""

from __future__ import annotations

from typing import Any

import numpy as np
import timm
import torch

from condcli.adapters import adapter_for
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.capture import capture
from condcli.inputs.batches import Batch, InputSpec, InputStream, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import np_kappa

F64 = torch.float64
KW: dict[str, Any] = {
    "img_size": 32,
    "patch_size": 8,
    "embed_dim": 32,
    "depth": 2,
    "num_heads": 4,
    "local_up_to_layer": 1,
}


def convit() -> torch.nn.Module:
    torch.manual_seed(0)
    model = timm.create_model("convit_tiny", pretrained=False, **KW).eval()
    with torch.no_grad():
        model.blocks[0].attn.qk.weight.mul_(5.0)  # a peaked P, so that a wrong one would not pass
        model.blocks[0].attn.gating_param.uniform_(-1.0, 1.0)  # a gate per head, off its init
    return model


def seen_by_hooks(model: torch.nn.Module, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """GPSA's input (A_l) and the output of its ``attn_drop`` (M), by the test's own hooks."""
    attn = model.blocks[0].attn
    seen: dict[str, torch.Tensor] = {}
    handles = [
        attn.register_forward_pre_hook(lambda m, a: seen.__setitem__("a", a[0])),
        attn.attn_drop.register_forward_hook(lambda m, a, o: seen.__setitem__("m", o)),
    ]
    try:
        with torch.no_grad():
            model(pixels)
    finally:
        for h in handles:
            h.remove()
    return seen["a"], seen["m"]


def content_softmax(model: torch.nn.Module, a: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ·d_h^-½) per head, float64, from the ``qk`` weights (rows [Q | K], heads contiguous)."""
    attn = model.blocks[0].attn
    B, N, C = a.shape
    h = attn.num_heads
    qk = a.to(F64) @ attn.qk.weight.detach().to(F64).T
    q, k = (t.reshape(B, N, h, C // h).transpose(1, 2) for t in qk.split(C, -1))
    return torch.softmax(q @ k.transpose(-1, -2) * (C // h) ** -0.5, -1)


def test_p_is_the_content_softmax_and_m_the_gated_mix() -> None:
    model = convit()
    adapter = adapter_for(model)
    gpsa, mhsa = adapter.layers
    assert gpsa.mixing is not None and "gated positional attention" in gpsa.attention
    assert mhsa.mixing is None
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    cap = capture(adapter, Batch({"pixel_values": pixels}, None, ["a", "b"]))
    a, m = seen_by_hooks(model, pixels)
    p = cap.layers[0].probs
    assert p is not None and p.shape == (2, 1, 4, 16, 16)
    want = content_softmax(model, a)
    torch.testing.assert_close(p[:, 0].to(F64), want, rtol=1e-5, atol=1e-6)
    mixed = gpsa.mixing(p.to(F64))
    torch.testing.assert_close(mixed[:, 0], m.to(F64), rtol=1e-5, atol=1e-6)
    assert float((m.to(F64) - want).abs().max()) > 1e-2  # M is not P: the gate mixes in positions


def test_spectrum_reports_kappa_of_p_and_of_m_as_numpy_does() -> None:
    loaded = load("tests.test_generic_gated:convit", LoadOptions(device="cpu"))
    model = loaded.model
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=2)
    report = analyse_spectrum(loaded, replayed, SpectrumOptions(lam=10.0, layers=[0]), "test")
    a, m = seen_by_hooks(model, batches[0].inputs["pixel_values"])
    p = content_softmax(model, a)
    layer = report.layers[0]
    kp, km = np_kappa(p.numpy()).max(1), np_kappa(m.double().numpy()).max(1)  # worst head per sample
    np.testing.assert_allclose(layer.plain["kappa_probs"].per_sample, kp, rtol=1e-3)
    np.testing.assert_allclose(layer.plain["kappa_mixing"].per_sample, km, rtol=1e-3)
