"""The actual κ(LA) of a RoPE model (docs/math.md#layers, positions inside attention): LA = R(Q) R(K)ᵀ V with
q and k rotated as the model rotates them, beside the unrotated κ(LA) that μ(LA) bounds. References: a float64
RoPE written here from the config (θ, the rotated share of each head, Gemma3's θ per layer type), the
model's own weights and attention inputs, and the model's own output_attentions (the rotation condcli
applies, fed through softmax, gives back the model's P)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import InputSpec, InputStream, stream
from condcli.loading.sources import LoadOptions, load
from tests.cases_decoders import CASES
from tests.helpers import EPS

F64 = torch.float64
NAMES = ["llama_gqa", "stablelm_partial_rotary", "gemma3"]


def _theta_and_share(config: Any, layer: int) -> tuple[float, float]:
    """θ and the rotated share of each head's channels, from the config as the family documents it."""
    params = config.rope_parameters
    if "rope_theta" not in params:  # Gemma3: one set per layer type
        params = params[config.layer_types[layer]]
    share = config.rope_parameters.get("partial_rotary_factor", 1.0)
    return float(params["rope_theta"]), float(share)


def _rope(x: torch.Tensor, theta: float, share: float) -> torch.Tensor:
    """Rotate-half RoPE on the first share·d_h channels of x (..., n, d_h), positions 0..n−1, float64."""
    n, dh = x.shape[-2:]
    r = int(dh * share)
    inv = 1.0 / theta ** (torch.arange(0, r, 2, dtype=F64) / r)
    angles = torch.arange(n, dtype=F64)[:, None] * inv[None]  # (n, r/2)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    xr = x[..., :r]
    half = torch.cat([-xr[..., r // 2 :], xr[..., : r // 2]], -1)
    return torch.cat([xr * cos + half * sin, x[..., r:]], -1)


def _project(a: torch.Tensor, lin: torch.nn.Linear, count: int, heads: int) -> torch.Tensor:
    """(S, n, d) → (S, H, n, d_h), no bias (Proposition 4.2); KV heads repeated per query head."""
    y = a @ lin.weight.detach().to(F64).T
    return y.unflatten(-1, (count, -1)).transpose(1, 2).repeat_interleave(heads // count, dim=1)


def _kappa(m: torch.Tensor) -> torch.Tensor:
    s = torch.linalg.svdvals(m)
    return s[..., 0] / s[..., -1]


@pytest.fixture(scope="module", params=NAMES)
def folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    import transformers as tf

    base = CASES["generic"][request.param].build()
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp(request.param)
    tf.AutoModelForCausalLM.from_config(base.config).save_pretrained(path)
    return request.param, path


def test_kappa_la_is_computed_with_the_model_rotation(folder: tuple[str, Path]) -> None:
    name, path = folder
    loaded = load(str(path), LoadOptions(device="cpu"))
    assert all(spec.rotation is not None for spec in loaded.adapter.layers)
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    replayed = InputStream("synthetic", "replayed", lambda s: iter(batches), expected=2)
    report = analyse_spectrum(loaded, replayed, SpectrumOptions(lam=10.0, heads=True), "test")
    model = loaded.model
    seen: dict[int, torch.Tensor] = {}
    handles = [
        block.self_attn.register_forward_pre_hook(
            lambda m, a, k, i=i: seen.__setitem__(i, k["hidden_states"].detach()), with_kwargs=True
        )
        for i, block in enumerate(model.layers)
    ]
    model.set_attn_implementation("eager")  # as the capture ran it: layer 1's input is bitwise the same
    try:
        with torch.no_grad():
            model(**batches[0].inputs)
    finally:
        for h in handles:
            h.remove()
    assert batches[0].lengths is None  # synthetic ids: every sample fills the batch, positions 0..n−1
    for layer, block in zip(report.layers, model.layers, strict=True):
        attn, config = block.self_attn, model.config
        heads, kv = config.num_attention_heads, config.num_key_value_heads
        a = seen[layer.index].to(F64)  # (S, n, d)

        q, k, v = (
            _project(a, lin, count, heads)
            for lin, count in ((attn.q_proj, heads), (attn.k_proj, kv), (attn.v_proj, kv))
        )
        theta, share = _theta_and_share(config, layer.index)
        rotated = _kappa(_rope(q, theta, share) @ (_rope(k, theta, share).mT @ v))  # (S, H)
        plain = _kappa(q @ (k.mT @ v))
        assert layer.heads_detail is not None
        for h, head in enumerate(layer.heads_detail):
            assert head.kappa_la_unrotated is not None
            # docs/math.md#spectra: within 1e-6 of float64 SVD (Gram path: eps·κ²); the model's own cos, sin
            # are float32 (angles to ~1e-6), which moves σ_min of LA by ~1e-6·σ_1: κ relative by ~1e-6·κ
            for got, want, rounding in (
                (head.kappa_la, rotated[:, h], 2e-6),
                (head.kappa_la_unrotated, plain[:, h], 0.0),
            ):
                rtol = 1e-6 + (100 * EPS + rounding) * float(want.max())
                torch.testing.assert_close(torch.tensor(got.per_sample, dtype=F64), want, rtol=rtol, atol=0)
        assert not torch.allclose(rotated, plain, rtol=1e-3), "the rotation changes κ(LA) here"
    assert any("κ(LA) actual: with the model's own rotation" in note for note in report.notes)
    assert any("μ(LA) is the bound for the unrotated, unbiased projections" in n for n in report.notes), name


OWN = [  # families with no q/k norm and no logit soft-capping: P follows from q, k alone
    "llama_gqa",
    "qwen2_bias",  # q/k biases
    "mistral_sliding",  # a sliding window
    "granite",  # its own attention multiplier for a scale
    "cohere",  # interleaved rotation
    "stablelm_partial_rotary",
    "phi2_partial_rotary",
    "phi3_fused",
    "gpt_neox_fused",  # partial, per-head fused projection
    "falcon_multi_query",
    "smollm3_nope",  # its second layer rotates nothing (NoPE): condcli must not rotate it either
]
NOPE = {"smollm3_nope": [True, False]}  # which layers rotate, where not all do


@pytest.mark.parametrize("name", OWN)
def test_the_rotation_is_the_model_own(name: str) -> None:
    """softmax(R(q) R(k)ᵀ · scale + the layer's mask) with condcli's rotation (and its q/k slices and
    biases) gives back the model's own P."""
    from condcli.adapters import adapter_for

    model = CASES["generic"][name].build()
    adapter = adapter_for(model)
    ids = torch.randint(5, 64, (2, 9), generator=torch.Generator().manual_seed(3))
    seen: dict[int, torch.Tensor] = {}
    handles = [
        spec.attn_in.module.register_forward_pre_hook(
            lambda m, a, k, i=spec.index: seen.__setitem__(i, (a[0] if a else k["hidden_states"]).detach()),
            with_kwargs=True,
        )
        for spec in adapter.layers
    ]
    model.set_attn_implementation("eager")
    model.config._attn_implementation = "eager"  # Falcon refuses the switch but reads its config
    try:
        with torch.no_grad():
            att = model(input_ids=ids, output_attentions=True).attentions
    finally:
        for h in handles:
            h.remove()
    n = ids.shape[1]
    ahead = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # key − query
    assert [s.rotation is not None for s in adapter.layers] == NOPE.get(name, [True] * len(adapter.layers))
    for spec in adapter.layers:
        masked = (ahead > 0) | (ahead <= -spec.window if spec.window else False)
        w = spec.weights()
        a = seen[spec.index].to(F64)[:, None]  # (S, 1, n, d)
        q = a @ w.wq + (0 if w.bq is None else w.bq[:, None])
        k = a @ w.per_query("k") + (0 if w.bk is None else w.bk[w.kv_index()][:, None])
        if spec.rotation is not None:
            q, k = spec.rotation(q, k)
        attn = spec.attn_in.module
        scale = getattr(attn, "scaling", getattr(attn, "inv_norm_factor", q.shape[-1] ** -0.5))
        p = ((q @ k.mT) * scale).masked_fill(masked, float("-inf")).softmax(-1)
        torch.testing.assert_close(p, att[spec.index].to(F64), rtol=1e-4, atol=1e-5)
