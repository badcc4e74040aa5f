"""A ViT that reads its tokens as an (B, H, W, C) grid (issue 42, "read what is ordinary"): SAM's vision
encoder inside the whole SamModel, whose config keeps its image size in ``vision_config`` only. Its grid is
read as N = H·W tokens, row-major; windowed blocks (padded, ``window_partition``) give one P per window, and
a global block one P over all H·W tokens. The reference is the model's own tensors, taken by hooks on its
blocks and attention modules, compared exactly as float64 (the model runs in float32: SAM computes its softmax
in float32 whatever the model's dtype, and returns it cast to that dtype)."""

from __future__ import annotations

import pytest
import torch

from condcli.adapters import adapter_for
from condcli.adapters.generic.verify import prove
from condcli.capture import capture
from condcli.inputs.batches import Batch

transformers = pytest.importorskip("transformers")

# a 6 × 6 grid padded to 8 × 8: 4 windows of 16 tokens; 48 is no size the trace tries unless told
B, HEADS, SIZE, PATCH, WINDOW = 2, 2, 48, 8, 4


def _sam(eager: bool = False) -> torch.nn.Module:
    vision = transformers.SamVisionConfig(
        hidden_size=32,
        output_channels=16,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        image_size=SIZE,
        patch_size=PATCH,
        window_size=WINDOW,
        global_attn_indexes=[1],
        mlp_dim=64,
        num_pos_feats=8,
    )
    prompt = transformers.SamPromptEncoderConfig(hidden_size=16, image_size=SIZE, patch_size=PATCH)
    decoder = transformers.SamMaskDecoderConfig(hidden_size=16, num_attention_heads=2, mlp_dim=32)
    config = transformers.SamConfig(
        vision_config=vision.to_dict(),
        prompt_encoder_config=prompt.to_dict(),
        mask_decoder_config=decoder.to_dict(),
    )
    if eager:  # the reference: the same model with its eager attention, which returns its weights
        config._attn_implementation = "eager"
    model = transformers.SamModel(config).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights large enough for attention that is not uniform, rel_pos included
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.ndim > 1 else 0.05))
    return model


def test_sam_grid_is_read_as_h_w_tokens_and_p_per_window_and_global() -> None:
    model = _sam()
    adapter = adapter_for(model)
    names = [spec.name for spec in adapter.layers]
    assert names[:2] == ["vision_encoder.layers.0", "vision_encoder.layers.1"]
    assert adapter.embedding.name == "vision_encoder.layers.0" and adapter.embedding.layout == "nhwc"
    pixels = torch.randn(B, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
    inputs = {"pixel_values": pixels}
    proven, _ = prove(adapter, inputs, B, chosen=[0, 1])
    assert [s.qkv_source for s in proven.layers[:2]] == ["generic (verified)"] * 2

    blocks: list[torch.Tensor] = []
    attn_in: list[torch.Tensor] = []
    weights: list[torch.Tensor] = []
    got = capture(proven, Batch(inputs, None, ["a", "b"]), layers=[0, 1])

    def first(args: tuple[torch.Tensor, ...], kwargs: dict[str, torch.Tensor]) -> torch.Tensor:
        return args[0] if args else kwargs["hidden_states"]

    twin = _sam(eager=True)
    assert all(type(layer.attn).__name__ == "SamVisionAttention" for layer in twin.vision_encoder.layers)
    hooks = []
    for layer in twin.vision_encoder.layers:
        hooks.append(
            layer.register_forward_pre_hook(lambda _m, a, k: blocks.append(first(a, k)), with_kwargs=True)
        )
        hooks.append(
            layer.attn.register_forward_pre_hook(
                lambda _m, a, k: attn_in.append(first(a, k)), with_kwargs=True
            )
        )
        hooks.append(layer.attn.register_forward_hook(lambda _m, _a, out: weights.append(out[1])))
    try:
        with torch.no_grad():
            twin(pixel_values=pixels)
    finally:
        for h in hooks:
            h.remove()

    grid = SIZE // PATCH
    assert [tuple(x.shape) for x in blocks] == [(B, grid, grid, 32)] * 2
    assert tuple(attn_in[0].shape) == (B * 4, WINDOW, WINDOW, 32)  # padded windows
    assert tuple(attn_in[1].shape) == (B, grid, grid, 32)  # global
    assert [tuple(w.shape) for w in weights] == [(B * 4 * HEADS, 16, 16), (B * HEADS, 36, 36)]
    # X and X_l: each sample's grid as H·W tokens, row-major
    torch.testing.assert_close(got.x.double(), blocks[0].double().reshape(B, grid * grid, 32), rtol=0, atol=0)
    for i in (0, 1):
        layer = got.layers[i]
        assert layer.x_in is not None and layer.attn_in is not None and layer.probs is not None
        torch.testing.assert_close(
            layer.x_in.double(), blocks[i].double().reshape(B, grid * grid, 32), rtol=0, atol=0
        )
        # A_l: the attention's own input, (B·G, h, w, C) → (B, G, h·w, C)
        a = attn_in[i].reshape(B, -1, attn_in[i].shape[1] * attn_in[i].shape[2], 32)
        torch.testing.assert_close(layer.attn_in.double(), a.double(), rtol=0, atol=0)
        # P: the weights the attention returned, (B·G·H, q, k) → (B, G, H, q, k), heads innermost
        q = weights[i].shape[-1]
        p = weights[i].double().reshape(B, -1, HEADS, q, q)
        torch.testing.assert_close(layer.probs.double(), p, rtol=0, atol=0)
    assert got.layers[0].probs.shape[1] == 4 and got.layers[1].probs.shape[1] == 1


def test_sam_whole_model_is_traced_at_its_vision_configs_size() -> None:
    """The trial forward runs at the vision config's image size (the size the inputs are made at), so the
    layers are found in call order with their layouts, not refused as a 3-axis map."""
    from condcli.adapters.generic.vision import example_images

    model = _sam()
    assert tuple(example_images(model)[0].shape[-2:]) == (SIZE, SIZE)
    adapter = adapter_for(model)
    words = [spec.attention for spec in adapter.layers[:2]]
    assert words == ["softmax in 4 groups of 16 tokens", "softmax"]
    assert not any("trial forward failed" in n for n in adapter.notes)
