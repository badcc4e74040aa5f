"""P of an HF attention that returns none (MiniCPM's vision towers: ``return attn_output, None`` whatever
``output_attentions`` says), read inside its call from the softmax ``eager_attention_forward`` computes.

Against independent references: softmax(q kᵀ·scale) recomputed in float64 from the attention's own input
and its q/k weights (hooks, not condcli), the model's plain output (bitwise equal), the torch function-mode
stack and hook counts (nothing left after a capture, also after a forward that raised inside a tapped
call), and the module's own code for the attentions that do return their weights (left as they are).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import _get_current_function_mode_stack

from condcli.adapters import adapter_for
from condcli.adapters.generic.probs import hf_forward, read_inside, returns_none
from condcli.capture import capture
from condcli.inputs.batches import Batch
from tests.recording import hook_count

transformers = pytest.importorskip("transformers")
minicpm = pytest.importorskip("transformers.models.minicpm_ocr.modeling_minicpm_ocr")

Tensor = torch.Tensor
HEADS = 4


def tiny(insert_layer_id: int = 6) -> nn.Module:
    """A 2-layer MiniCPM-o OCR vision tower with random weights, eager attention (its merger runs after
    layer ``insert_layer_id``: never, by default, as in the breadth sweep's tiny config)."""
    config = minicpm.MiniCPMOcrVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        image_size=32,
        patch_size=4,
        insert_layer_id=insert_layer_id,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return minicpm.MiniCPMOcrVisionModel(config).eval()


def image(h: int = 3, w: int = 4, seed: int = 1) -> dict[str, Tensor]:
    """One image of h × w patches (4 × 4 pixels each) and its patch grid."""
    pixels = torch.randn(1, 3, 4 * h, 4 * w, generator=torch.Generator().manual_seed(seed))
    return {"pixel_values": pixels, "target_sizes": torch.tensor([[h, w]], dtype=torch.int32)}


def reference(model: nn.Module, inputs: dict[str, Tensor]) -> list[Tensor]:
    """Each encoder attention's softmax(q kᵀ·d_h^-½), float64, from its input and q/k weights (1, H, n, n)."""
    seen: list[Tensor] = []
    attns = [layer.self_attn for layer in model.encoder.layers]
    handles = [
        a.register_forward_pre_hook(
            lambda m, args, kwargs: seen.append(kwargs["hidden_states"]), with_kwargs=True
        )
        for a in attns
    ]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    out = []
    for a, x in zip(attns, seen, strict=True):

        def proj(lin: nn.Linear, x: Tensor = x) -> Tensor:
            y = x.double() @ lin.weight.double().T + lin.bias.double()
            return y.unflatten(-1, (HEADS, -1)).transpose(1, 2)

        q, k = proj(a.q_proj), proj(a.k_proj)
        out.append(torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1))
    return out


def test_minicpm_attention_is_read_inside_its_call_and_only_it() -> None:
    model = tiny()
    attn = model.encoder.layers[0].self_attn
    assert returns_none(attn)
    # attentions that return their weights keep returning them: nothing is read inside their call
    vit = transformers.ViTModel(
        transformers.ViTConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
        )
    )
    llama = transformers.LlamaModel(
        transformers.LlamaConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, vocab_size=50
        )
    )
    gpt = transformers.ImageGPTModel(
        transformers.ImageGPTConfig(n_embd=32, n_layer=1, n_head=4, vocab_size=20, n_positions=16)
    )
    for other in (vit, llama, gpt):
        assert not any(returns_none(m) for m in other.modules())


class FusedBlind(nn.Module):
    """Returns (output, None) from scaled_dot_product_attention: no softmax to read."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: Tensor) -> tuple[Tensor, None]:
        q, k, v = self.qkv(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2), None


def test_an_attention_that_returns_none_from_fused_attention_is_not_read() -> None:
    assert not returns_none(FusedBlind())


def test_capture_takes_the_softmax_of_each_call_as_p_against_a_float64_reference() -> None:
    model = tiny()
    inputs = image()
    adapter = adapter_for(model)
    names = [s.name for s in adapter.layers]
    assert names[:2] == ["encoder.layers.0", "encoder.layers.1"]
    want = reference(model, inputs)
    with torch.no_grad():
        plain = model(**inputs).last_hidden_state
    depth, hooks = len(_get_current_function_mode_stack()), hook_count(model)
    cap = capture(adapter, Batch(inputs, None, ["a"]), layers=[0, 1], to_end=True)
    assert len(_get_current_function_mode_stack()) == depth and hook_count(model) == hooks
    assert torch.equal(cap.output.last_hidden_state, plain)  # the model computes what it would
    n = inputs["target_sizes"].prod().item()
    for i in (0, 1):
        p = cap.layers[i].probs
        assert p is not None and p.shape == (1, 1, HEADS, n, n)
        ref = want[i].unsqueeze(1)
        assert torch.allclose(p.double(), ref, rtol=0, atol=1e-6), (p.double() - ref).abs().max()
        assert torch.allclose(p.double().sum(-1), torch.ones(1, 1, HEADS, n, dtype=torch.float64), atol=1e-6)
    # the attention modules still return None once the capture is over
    with torch.no_grad():
        out = model.encoder.layers[0].self_attn(
            hidden_states=torch.randn(1, 5, 32), cu_seqlens=torch.tensor([0, 5]), max_seqlen=5
        )
    assert out[1] is None


def run_recording(model: nn.Module, inputs: dict[str, Tensor], attn: nn.Module) -> list[Any]:
    """What ``attn`` returned as its weights in each call of one forward inside :func:`read_inside`."""
    got: list[Any] = []
    handle = attn.register_forward_hook(lambda m, a, out: got.append(out[1]))
    try:
        with read_inside([attn]), torch.no_grad():
            model(**inputs)
    finally:
        handle.remove()
    return got


def test_a_call_over_several_packed_sequences_keeps_its_none() -> None:
    model = tiny()
    attn = model.encoder.layers[0].self_attn
    one = run_recording(model, image(2, 2), attn)
    assert len(one) == 1 and isinstance(one[0], Tensor) and one[0].shape == (1, HEADS, 4, 4)
    # two 2 × 2 images packed into one sequence: one softmax each, over its own keys: no one P
    packed = {
        "pixel_values": torch.randn(1, 3, 8, 16, generator=torch.Generator().manual_seed(2)),
        "target_sizes": torch.tensor([[2, 2], [2, 2]], dtype=torch.int32),
    }
    assert run_recording(model, packed, attn) == [None]


def test_the_merger_windowed_attention_is_not_given_a_p() -> None:
    model = tiny(insert_layer_id=0)
    assert run_recording(model, image(4, 4), model.vit_merger.self_attn) == [None]  # one softmax per window


def test_a_forward_that_raises_inside_a_read_call_leaves_no_mode_and_no_hook() -> None:
    model = tiny()
    adapter = adapter_for(model)
    hooks = hook_count(model)

    def boom(m: nn.Module, args: Any, out: Any) -> None:
        raise RuntimeError("boom")

    raising = model.encoder.layers[0].self_attn.k_proj.register_forward_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            capture(adapter, Batch(image(), None, ["a"]), layers=[0, 1])
    finally:
        raising.remove()
    assert _get_current_function_mode_stack() == [] and hook_count(model) == hooks


def test_hf_forward_reads_inside_only_under_eager_attention() -> None:
    model = tiny()
    attn = model.encoder.layers[0].self_attn
    run = hf_forward(model, [layer.self_attn for layer in model.encoder.layers])
    assert run is not None
    got: list[Any] = []
    handle = attn.register_forward_hook(lambda m, a, out: got.append(out[1]))
    try:
        with torch.no_grad():
            run(image())
            model.config._attn_implementation = "sdpa"
            run(image())
    finally:
        handle.remove()
        model.config._attn_implementation = "eager"
    assert isinstance(got[0], Tensor) and got[1] is None
    assert hook_count(model) == 0
