"""Hooks that survive the forward (issue 29, point 5): modules a model re-creates inside ``forward``.

- A toy that re-creates its attention modules on its first forward around the same q, k, v (as BigBird's
  ``set_attention_type`` does): the capture hooks the modules that now compute, and X_l, A_l and P equal
  the test's own float64 recomputation from the weights.
- Tiny BigBird (block_sparse, an input short enough that it switches to full attention inside forward):
  A_l and P equal its own ``output_attentions``, also after it switched.
- A toy that re-creates its attention with new weights, or at every forward: one line, exit 2.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import transformers as tf
from torch import nn

from condcli.adapters import adapter_for
from condcli.capture import capture
from condcli.errors import InputError
from condcli.inputs.batches import Batch
from tests.toy_models import ToyAttention

F64 = torch.float64
Tensor = torch.Tensor


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.norm, self.attn = nn.LayerNorm(d), ToyAttention(d, heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.norm(x))


class Swapping(nn.Module):
    """Pre-norm softmax attention blocks whose ``forward`` re-creates each block's attention module: once,
    around the same projections (``mode="once"``), at every call (``"always"``), or once with new weights
    (``"new"``). ``text``: token ids in (the generic text path, read with no trial forward), else pixels
    (the vision path, whose trial forward re-creates them while the model is read)."""

    def __init__(self, mode: str, text: bool, d: int = 16, heads: int = 4, depth: int = 2) -> None:
        super().__init__()
        self.mode, self.swapped = mode, False
        if text:
            self.main_input_name = "input_ids"
            self.config = SimpleNamespace()  # called with the batch's keywords, as an HF model is
        self.embed = nn.Embedding(64, d) if text else nn.Linear(3 * 8 * 8, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(depth))

    def _swap(self) -> None:
        for block in self.blocks:
            old, new = block.attn, ToyAttention(block.attn.q.in_features, block.attn.num_heads)
            if self.mode != "new":
                new.q, new.k, new.v = old.q, old.k, old.v
            block.attn = new.eval()
        self.swapped = True

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_floating_point():
            B = x.shape[0]
            x = x.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(B, -1, 192)
        return self.embed(x)

    def forward(
        self, pixel_values: Tensor | None = None, input_ids: Tensor | None = None, **_: Any
    ) -> Tensor:
        if self.mode == "always" or not self.swapped:
            self._swap()
        x = pixel_values if pixel_values is not None else input_ids
        assert x is not None
        h = self.tokens(x)
        for block in self.blocks:
            h = block(h)
        return h


def batch(text: bool) -> Batch:
    gen = torch.Generator().manual_seed(1)
    if text:
        ids = torch.randint(0, 64, (2, 16), generator=gen)
        return Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    return Batch({"pixel_values": torch.randn(2, 3, 32, 32, generator=gen)}, None, ["a", "b"])


@pytest.mark.parametrize("text", [True, False], ids=["text", "vision"])
def test_a_module_re_created_once_is_hooked_where_it_now_is(text: bool) -> None:
    torch.manual_seed(0)
    model = Swapping("once", text).eval()
    adapter = adapter_for(model)
    before = [b.attn for b in model.blocks]
    cap = capture(adapter, batch(text))
    assert all(b.attn is not a for a, b in zip(before, model.blocks, strict=True)) or not text
    # the test's own float64 forward, from the weights
    m = model.double()
    inputs = batch(text).inputs
    h = m.tokens(inputs["input_ids"] if text else inputs["pixel_values"].to(F64))
    for i, block in enumerate(m.blocks):
        a = block.norm(h)
        q, k, v = (
            lin(a).reshape(2, 16, 4, 4).transpose(1, 2) for lin in (block.attn.q, block.attn.k, block.attn.v)
        )
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(4), -1)
        layer = cap.layers[i]
        assert layer.x_in is not None and layer.attn_in is not None and layer.probs is not None
        torch.testing.assert_close(layer.x_in.to(F64), h, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(layer.attn_in[:, 0].to(F64), a, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(layer.probs[:, 0].to(F64), p, rtol=1e-5, atol=1e-6)
        h = h + (p @ v).transpose(1, 2).reshape(2, 16, 16)
    again = capture(adapter, batch(text))  # stable now: the same modules are hooked straight away
    assert again.layers[1].probs is not None


@pytest.mark.parametrize(
    ("mode", "words"), [("new", "with other weights than those condcli read"), ("always", "at every forward")]
)
def test_a_module_re_created_with_new_weights_or_at_every_forward_is_refused(mode: str, words: str) -> None:
    torch.manual_seed(0)
    model = Swapping(mode, text=True).eval()
    with pytest.raises(InputError, match=words) as e:
        capture(adapter_for(model), batch(True))
    assert e.value.exit_code == 2 and "\n" not in str(e.value)


def test_bigbird_switching_to_full_attention_inside_forward() -> None:
    torch.manual_seed(0)
    config = tf.BigBirdConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        attention_type="block_sparse",
        block_size=2,
        num_random_blocks=2,
        initializer_range=0.3,
    )
    model = tf.BigBirdModel(config).eval()
    assert type(model.encoder.layer[0].attention.self).__name__ == "BigBirdBlockSparseAttention"
    adapter = adapter_for(model)
    ids = torch.randint(5, 64, (2, 7), generator=torch.Generator().manual_seed(1))  # 7 ≤ (5 + 2·2)·2 tokens
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    cap = capture(adapter, batch)
    assert type(model.encoder.layer[0].attention.self).__name__ == "BigBirdSelfAttention"  # it switched
    seen: list[torch.Tensor] = []
    handles = [
        layer.attention.register_forward_pre_hook(
            lambda m, a, kw: seen.append((a or (kw["hidden_states"],))[0]), with_kwargs=True
        )
        for layer in model.encoder.layer
    ]
    try:
        model.set_attn_implementation("eager")
        with torch.no_grad():
            out = model(**batch.inputs, output_attentions=True, output_hidden_states=True)
    finally:
        for h in handles:
            h.remove()
    for i, p in enumerate(out.attentions):
        layer = cap.layers[i]
        assert layer.probs is not None and layer.attn_in is not None and layer.x_in is not None
        torch.testing.assert_close(layer.probs[:, 0], p)
        torch.testing.assert_close(layer.attn_in[:, 0], seen[i])
        torch.testing.assert_close(layer.x_in, out.hidden_states[i])


def test_a_module_replaced_before_the_capture_is_followed_or_refused_in_one_line() -> None:
    """The model's own forward ran first and re-created its attention: the attention (with its q, k, v) is
    found again by its weights; its parameter-less softmax cannot be, and is refused in one line."""
    torch.manual_seed(0)
    model = Swapping("once", text=True).eval()
    adapter = adapter_for(model)
    with torch.no_grad():
        adapter.run(batch(True).inputs)  # re-creates the attention modules
    a_only = capture(adapter, batch(True), probes=("x_in", "attn_in"))
    assert all(layer.attn_in is not None for layer in a_only.layers.values())
    with pytest.raises(InputError, match="replaced its module Softmax in an earlier forward") as e:
        capture(adapter, batch(True))
    assert e.value.exit_code == 2 and "\n" not in str(e.value)


class ForwardCalling(Swapping):
    """Blocks run by ``block.forward(h)`` rather than ``block(h)`` (SqueezeBERT's encoder does this): no
    module hook of theirs ever fires."""

    def forward(
        self, pixel_values: Tensor | None = None, input_ids: Tensor | None = None, **_: Any
    ) -> Tensor:
        x = pixel_values if pixel_values is not None else input_ids
        assert x is not None
        h = self.tokens(x)
        for block in self.blocks:
            h = block.forward(h)
        return h


def test_a_block_the_forward_runs_by_forward_is_captured_as_it_computes() -> None:
    """A module run through ``.forward()`` is routed through its hooks during the capture (issue 42; it
    used to be refused in one line, and before that to end in "the embedding point … never ran", exit 3):
    each block's captured input is the one the model's own forward gives it."""
    torch.manual_seed(0)
    model = ForwardCalling("none", text=True).eval()
    model.swapped = True  # no re-creation: only the way the blocks are called differs
    b = batch(True)
    got = capture(adapter_for(model), b)
    with torch.no_grad():
        h = model.tokens(b.inputs["input_ids"])
        for i, block in enumerate(model.blocks):
            x_in = got.layers[i].x_in
            assert x_in is not None
            torch.testing.assert_close(x_in, h)
            h = block(h)
