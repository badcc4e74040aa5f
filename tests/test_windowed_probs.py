"""Per-window P returned 3-D (issue 42): SAM's vision encoder attends in windows and returns its weights as
(B·G·H, q, q), batch, window and head folded into one axis, and its global layers as (B·H, n, n). condcli
reads each window's square P as its own group; a sample's κ(P) per head is its worst window's. The reference
is the model's own attention weights (an eager twin holding the same weights), cut into windows here and
decomposed in float64."""

from __future__ import annotations

import copy

import pytest
import torch

import condcli

transformers = pytest.importorskip("transformers")

B, HEADS = 3, 2


def test_sam_windowed_and_global_p_match_the_models_own_weights() -> None:
    config = transformers.SamHQVisionConfig(
        hidden_size=32,
        output_channels=16,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        image_size=64,
        patch_size=8,
        window_size=3,  # an 8 × 8 grid padded to 9 × 9: 9 windows of 9 tokens in layer 0
        global_attn_indexes=[1],
        mlp_dim=64,
        num_pos_feats=8,
    )
    model = transformers.SamHQVisionModel(config).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights large enough for attention that is not uniform
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.ndim > 1 else 0.05))
    pixels = torch.randn(B, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    report = condcli.spectrum(model, pixels, heads=True, conditioned=False)

    eager_config = copy.deepcopy(config)
    eager_config._attn_implementation = "eager"
    twin = transformers.SamHQVisionModel(eager_config).eval()
    twin.load_state_dict(model.state_dict())
    weights: list[torch.Tensor] = []
    hooks = [
        layer.attn.register_forward_hook(lambda _m, _a, out: weights.append(out[1]))
        for layer in twin.vision_encoder.layers
    ]
    with torch.no_grad():
        twin(pixels, output_attentions=True)
    for h in hooks:
        h.remove()

    assert [w.shape for w in weights] == [(B * 9 * HEADS, 9, 9), (B * HEADS, 64, 64)]
    assert [layer.name for layer in report.layers] == ["vision_encoder.layers.0", "vision_encoder.layers.1"]
    for layer, w in zip(report.layers, weights, strict=True):
        q = w.shape[-1]
        p = w.double().reshape(B, -1, HEADS, q, q)  # (B, G, H, q, q): heads innermost, then windows
        sigma = torch.linalg.svdvals(p)
        reference = (sigma[..., 0] / sigma[..., -1]).amax(1)  # (B, H): each sample's worst window
        for head in layer.heads_detail:
            got = head.values["kappa_probs"]
            assert not any(got.per_sample_floor)
            torch.testing.assert_close(
                torch.tensor(got.per_sample, dtype=torch.float64), reference[:, head.head], rtol=1e-6, atol=0
            )
