"""An HF attention that returns its output alone (MobileViT's ``forward(...) -> torch.Tensor``) computes P as
a function inside its call: the generic path observes that softmax instead of asking for weights it never
returns (it used to refuse the whole run: "returned no attention weights")."""

from __future__ import annotations

import math

import torch
import transformers as tf

from condcli.adapters import adapter_for
from condcli.adapters.generic.probs import returns_weights
from condcli.capture import capture
from condcli.inputs.batches import Batch


def test_mobilevit_p_is_the_softmax_of_its_own_q_and_k() -> None:
    torch.manual_seed(0)
    config = tf.MobileViTConfig(
        image_size=64,
        hidden_sizes=[16, 24, 32],
        neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
        num_attention_heads=2,
    )
    model = tf.MobileViTModel(config).eval()
    attn = model.encoder.layer[2].transformer.layer[0].attention.attention
    assert not returns_weights(attn)
    assert returns_weights(
        tf.BertModel(
            tf.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
        )
        .encoder.layer[0]
        .attention.self
    )
    adapter = adapter_for(model)
    pixels = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    cap = capture(adapter, Batch({"pixel_values": pixels}, None, ["a", "b"]), to_end=True)
    layer = cap.layers[0]
    assert layer.attn_in is not None and layer.probs is not None
    a = layer.attn_in.to(torch.float64)  # (B, G, n, d): the attention input per patch group
    heads = 2
    d = a.shape[-1]
    dh = d // heads

    def project(lin: torch.nn.Linear) -> torch.Tensor:
        w, b = lin.weight.to(torch.float64), lin.bias.to(torch.float64)
        return (a @ w.T + b).unflatten(-1, (heads, dh)).transpose(-2, -3)  # (B, G, H, n, d_h)

    q, k = project(attn.query), project(attn.key)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), -1)
    torch.testing.assert_close(layer.probs.to(torch.float64), p, rtol=1e-4, atol=1e-6)
