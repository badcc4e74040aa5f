"""Where positions enter (docs/math.md#x), as the generic adapter reports it: X follows a learned absolute
position embedding that runs before the first block (DistilBERT, OPT, CLIP vision, HF DeiT), or carries none
and the report says where positions enter instead (Llama: rotary, inside attention). References: the model's
own hidden_states[0] and the order in which its modules run."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from condcli.adapters import adapter_for
from condcli.capture import capture
from condcli.inputs.batches import Batch

SMALL = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 64}


def _model(name: str) -> nn.Module:
    import transformers as tf

    torch.manual_seed(0)
    vision = {"image_size": 32, "patch_size": 8}
    config: Any = {
        "distilbert": lambda: tf.DistilBertConfig(
            vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=64
        ),
        "opt": lambda: tf.OPTConfig(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            ffn_dim=64,
            num_attention_heads=4,
            word_embed_proj_dim=32,
        ),
        "clip_vision": lambda: tf.CLIPVisionConfig(**SMALL, **vision),
        "deit": lambda: tf.DeiTConfig(**SMALL, **vision),
        "llama": lambda: tf.LlamaConfig(vocab_size=64, **SMALL),
    }[name]()
    return tf.AutoModel.from_config(config).eval()


def _batch(name: str) -> Batch:
    torch.manual_seed(1)
    if name in ("clip_vision", "deit"):
        return Batch({"pixel_values": torch.randn(2, 3, 32, 32)}, None, ["a", "b"])
    ids = torch.randint(2, 64, (2, 7))
    return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])


ABSOLUTE = {  # the position embedding each family adds before its first block
    "distilbert": "embeddings.position_embeddings",
    "opt": "decoder.embed_positions",
    "clip_vision": "embeddings.position_embedding",
    "deit": "embeddings.position_embeddings",
}


@pytest.mark.parametrize("name", list(ABSOLUTE))
def test_x_follows_the_absolute_position_embedding(name: str) -> None:
    model = _model(name)
    adapter = adapter_for(model)
    e = adapter.embedding
    assert adapter.family == "generic" and e.after_position_encoding
    pos = ABSOLUTE[name]
    then = (
        ", then the norm pre_layrnorm" if name == "clip_vision" else ""
    )  # CLIP normalises X before the blocks
    assert e.description.startswith("input of ") and e.description.endswith(
        f"(after the position embedding {pos}{then})"
    )
    assert any(pos in note for note in adapter.notes)
    batch = _batch(name)
    order: list[str] = []
    first = adapter.layers[0].x_in.module
    modules = dict(model.named_modules())
    watched = {"first block": first} | ({pos: modules[pos]} if pos in modules else {})
    handles = [m.register_forward_pre_hook(lambda *_, n=n: order.append(n)) for n, m in watched.items()]
    try:
        got = capture(adapter, batch, probes=("x_in",))
        with torch.no_grad():
            hs = model(**batch.inputs, output_hidden_states=True).hidden_states
    finally:
        for h in handles:
            h.remove()
    if pos in modules:  # a module (not a bare parameter): it ran, and before the first block
        assert order.index(pos) < order.index("first block")
    torch.testing.assert_close(got.x, hs[0], rtol=0, atol=0)


def test_rotary_model_x_carries_no_position_encoding() -> None:
    adapter = adapter_for(_model("llama"))
    e = adapter.embedding
    assert not e.after_position_encoding
    assert "positions enter inside attention (rotary)" in e.description
    assert any(
        "carries no position encoding: positions enter inside attention (rotary)" in n for n in adapter.notes
    )
