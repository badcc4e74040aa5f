"""A declared adapter for grouped-query attention (a tiny random Llama): the same capture and W slices as
the generic adapter, P equal to the model's own output_attentions, W_K/W_V with kv_heads slices."""

from __future__ import annotations

from pathlib import Path

import torch

from condcli.adapters import adapter_for
from condcli.inputs.batches import Batch
from tests.test_declared_adapter import both, declare


def test_llama_gqa_declared_equals_generic_and_output_attentions(tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = LlamaModel(config).eval()
    data = {
        "input": "text",
        "embedding": {"module": "embed_tokens", "x": "output", "position_encoded": False},
        "blocks": {"path": "layers.*"},
        "attention": {
            "module": "self_attn",
            "heads": 4,
            "kv_heads": 2,
            "causal": True,
            "projections": {"q": "q_proj", "k": "k_proj", "v": "v_proj"},
            "probs": {"source": "returned"},
        },
    }
    declared = adapter_for(model, declare(tmp_path, data))
    assert all(s.causal for s in declared.layers)
    ids = torch.randint(0, 50, (2, 7))
    got, _ = both(
        model, declared, Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    )
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(got.x, out.hidden_states[0], rtol=0, atol=0)
    for i, layer in enumerate(model.layers):
        torch.testing.assert_close(got.layers[i].probs, out.attentions[i].unsqueeze(1))
        w = declared.layers[i].weights()
        assert (w.heads, w.kv_heads) == (4, 2)
        for g in range(2):  # KV head g: rows g·d_h … of k_proj and v_proj
            rows = slice(8 * g, 8 * g + 8)
            torch.testing.assert_close(
                w.wk[g], layer.self_attn.k_proj.weight[rows].T.double(), rtol=0, atol=0
            )
            torch.testing.assert_close(
                w.wv[g], layer.self_attn.v_proj.weight[rows].T.double(), rtol=0, atol=0
            )
