"""P when it is on request (issue 29, point 4), on tiny random-init HF models of no family of their own.

- MPNet returns its weights only ``if output_attentions`` (read from the module's forward signature, not a
  list of families): P equals the model's own ``output_attentions``, and rank-decay's c_m equals NumPy's on
  that P (before, P was null and rank-decay ended in exit 3).
- Data2Vec-Vision builds SDPA attention classes when it is built, which a later switch to eager does not
  reach: they run as their eager twins while P is captured.
- GPT-OSS adds a learned sink to the keys and drops its column: P's rows sum to less than 1; it is taken
  as the matrix that multiplies V, equal to ``output_attentions``, and said so.
- A P that does not come is refused in one line naming the layer (capture, and rank-decay): never a null.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import transformers as tf
from torch import nn

from condcli.adapters import adapter_for
from condcli.adapters.generic.probs import eager_twin, returned_probs, weights_on_request
from condcli.analysis.rank_decay import _into
from condcli.analysis.rank_layers import RankAccumulator
from condcli.capture import LayerCapture, capture
from condcli.errors import InputError
from condcli.inputs.batches import Batch, InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import np_cumulative

SPEC = "tests.test_generic_on_request:mpnet"


def mpnet() -> nn.Module:
    torch.manual_seed(0)
    config = tf.MPNetConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        initializer_range=0.3,
    )
    return tf.MPNetModel(config).eval()


def tokens(vocab: int = 64) -> Batch:
    ids = torch.randint(5, vocab, (2, 7), generator=torch.Generator().manual_seed(1))
    return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])


def own_attentions(model: Any, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The model's own P: an eager run with output_attentions (the reference, never through condcli)."""
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    return tuple(out.attentions)


def test_mpnet_p_on_request_is_the_model_own() -> None:
    model = mpnet()
    attn = model.encoder.layer[0].attention.attn
    assert weights_on_request(attn)  # its forward takes output_attentions
    adapter = adapter_for(model)
    batch = tokens()
    cap = capture(adapter, batch)
    want = own_attentions(model, batch.inputs)
    for i, p in enumerate(want):
        got = cap.layers[i].probs
        assert got is not None
        torch.testing.assert_close(got[:, 0], p)
        assert float((p - p.mean(-1, keepdim=True)).abs().max()) > 1e-3  # informative


def test_rank_decay_on_mpnet_equals_numpy_on_its_own_p(cli_json: Callable[..., dict[str, Any]]) -> None:
    r = cli_json("rank-decay", SPEC, "--max-samples", "2", "--batch-size", "2")
    loaded = load(SPEC, LoadOptions(device="cpu"))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    want = own_attentions(mpnet(), batch.inputs)
    for layer, p in zip(r["rank_decay"]["layers"], want, strict=True):
        c = np_cumulative(p.double().numpy())  # (S, H, n)
        n = p.shape[-1]
        np.testing.assert_allclose(layer["cumulative"]["median"], np.median(c.reshape(-1, n), 0), rtol=1e-5)


def test_an_sdpa_built_attention_runs_as_its_eager_twin_for_p() -> None:
    torch.manual_seed(0)
    config = tf.Data2VecVisionConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        initializer_range=0.3,
    )
    model = tf.Data2VecVisionModel(config).eval()
    attn = model.encoder.layer[0].attention.attention
    assert type(attn).__name__ == "Data2VecVisionSdpaSelfAttention"
    assert eager_twin(attn) is type(attn).__bases__[0]
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    cap = capture(adapter_for(model), Batch({"pixel_values": pixels}, None, ["a", "b"]))
    assert type(attn).__name__ == "Data2VecVisionSdpaSelfAttention"  # restored
    torch.manual_seed(0)
    eager = tf.Data2VecVisionModel._from_config(config, attn_implementation="eager").eval()
    assert type(eager.encoder.layer[0].attention.attention).__name__ == "Data2VecVisionSelfAttention"
    eager.load_state_dict(model.state_dict())
    for i, p in enumerate(own_attentions(eager, {"pixel_values": pixels})):
        got = cap.layers[i].probs
        assert got is not None
        torch.testing.assert_close(got[:, 0], p)


def test_a_sink_column_dropped_is_still_p_the_matrix_that_multiplies_v() -> None:
    torch.manual_seed(0)
    config = tf.GptOssConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=4,
        initializer_range=0.3,
    )
    model = tf.GptOssModel(config).eval()
    adapter = adapter_for(model)
    assert all("learned sink" in s.attention for s in adapter.layers)
    assert any("drops its column" in n for n in adapter.notes)
    batch = tokens()
    cap = capture(adapter, batch)
    for i, p in enumerate(own_attentions(model, batch.inputs)):
        got = cap.layers[i].probs
        assert got is not None
        torch.testing.assert_close(got[:, 0], p)
        assert float(p.sum(-1).min()) < 0.99  # rows no longer sum to 1: the sink took the rest


def test_a_p_that_does_not_come_is_refused_naming_the_layer() -> None:
    out = torch.zeros(2, 3, 8)
    with pytest.raises(InputError, match=r"layer blocks\.3: P cannot be observed: it returned no attention"):
        returned_probs("blocks.3", "one", "outer", 1, (), {}, (out, None), 2)
    sub = torch.full((2, 1, 3, 3), 0.2)  # rows sum to 0.6: not a softmax, and no sink in the module
    with pytest.raises(InputError, match="rows sum to less than 1"):
        returned_probs("blocks.3", "one", "outer", 1, (), {}, (out, sub), 2)
    assert returned_probs("b", "at most one", "outer", 1, (), {}, (out, sub), 2).shape == (2, 1, 1, 3, 3)


def test_rank_decay_refuses_a_layer_whose_p_did_not_come_with_exit_2() -> None:
    spec = adapter_for(mpnet()).layers[1]
    take = _into({1: RankAccumulator(spec, per_head=False)})
    with pytest.raises(InputError, match=r"layer 1 \(encoder\.layer\.1\): P cannot be observed") as e:
        take(LayerCapture(1, probs=None), None)
    assert e.value.exit_code == 2


def test_hiera_mask_unit_weights_on_request_b_h_g_are_read_as_groups() -> None:
    """Hiera returns (B, H, G, q, k) only on request (G mask units): P is the same numbers as (B, G, H, …)."""
    torch.manual_seed(0)
    config = tf.HieraConfig(
        image_size=[64, 64],
        patch_size=[7, 7],
        patch_stride=[4, 4],
        patch_padding=[3, 3],
        embed_dim=16,
        depths=[1, 1],
        num_heads=[1, 2],
        query_stride=[2, 2],
        masked_unit_size=[8, 8],
        masked_unit_attention=[True, False],
        num_query_pool=1,
        initializer_range=0.3,
    )
    model = tf.HieraModel(config).eval()
    pixels = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    cap = capture(adapter_for(model), Batch({"pixel_values": pixels}, None, ["a", "b"]))
    for i, p in enumerate(own_attentions(model, {"pixel_values": pixels})):
        got = cap.layers[i].probs
        assert got is not None and p.ndim == 5
        torch.testing.assert_close(got, p.transpose(1, 2))


def test_funnel_blocks_of_layers_are_one_stack_with_p_on_request() -> None:
    """Funnel keeps its layers in a list of lists (never called themselves) and returns P on request: every
    layer is analysed, and P (the second block's over pooled queries) is the model's own."""
    torch.manual_seed(0)
    config = tf.FunnelConfig(
        vocab_size=64, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1], initializer_range=0.3
    )
    model = tf.FunnelBaseModel(config).eval()
    adapter = adapter_for(model)
    assert [s.name for s in adapter.layers] == ["encoder.blocks.0.0", "encoder.blocks.1.0"]
    ids = torch.randint(5, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    cap = capture(adapter, batch)
    want = own_attentions(model, batch.inputs)
    assert [tuple(p.shape[-2:]) for p in want] == [(8, 8), (4, 8)]  # the second block pools its queries
    for i, p in enumerate(want):
        got = cap.layers[i].probs
        assert got is not None
        torch.testing.assert_close(got[:, 0], p)
