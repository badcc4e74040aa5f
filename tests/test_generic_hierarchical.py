"""The generic path on hierarchical and hybrid vision models, beyond the conformance table: layers in the
order the model calls them (not the order it registers them), a batch axis that folds the images innermost,
a model whose trial forward fails, conditioning that reaches a block reading unfolded patches, and where X
is said to be (docs/math.md#x). References: the models' own modules, called by the test."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from condcli.adapters import adapter_for
from condcli.capture import capture
from condcli.conditioning import Conditioning
from condcli.inputs.batches import Batch
from tests import vision_hybrid as vh
from tests import vision_timm as vt
from tests.toy_models import ToyBlock

D, HEADS = 16, 4


def _patches(pixels: torch.Tensor) -> torch.Tensor:
    b = pixels.shape[0]
    return pixels.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(b, -1, 192)


def _batch(size: int = 32, n: int = 2) -> Batch:
    pixels = torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(3))
    return Batch({"pixel_values": pixels}, None, [str(i) for i in range(n)])


class _Reversed(nn.Module):
    """Registers ``late`` before ``early`` and calls ``early`` first."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(192, D)
        self.late = ToyBlock(D, HEADS)
        self.early = ToyBlock(D, HEADS)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.late(self.early(self.embed(_patches(pixel_values))))


def test_layers_follow_the_call_order() -> None:
    torch.manual_seed(0)
    model = _Reversed().eval()
    adapter = adapter_for(model)
    assert [s.name for s in adapter.layers] == ["early", "late"]
    assert any("order the model calls them" in n for n in adapter.notes)
    got = capture(adapter, _batch())
    with torch.no_grad():
        x = model.embed(_patches(_batch().inputs["pixel_values"]))
        torch.testing.assert_close(got.x, x)
        torch.testing.assert_close(got.layers[1].x_in, model.early(x))


class _Innermost(nn.Module):
    """Attends within 4 windows of 4 tokens, folding the images innermost: row g·B + b of (G·B, n, d)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(192, D)
        self.blocks = nn.ModuleList(ToyBlock(D, HEADS) for _ in range(2))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.embed(_patches(pixel_values))  # (B, 16, d)
        b = x.shape[0]
        x = x.reshape(b, 4, 4, D).transpose(0, 1).reshape(4 * b, 4, D)
        for blk in self.blocks:
            x = blk(x)
        return x.reshape(4, b, 4, D).transpose(0, 1).reshape(b, 16, D)


def test_images_folded_innermost_stay_samples() -> None:
    torch.manual_seed(0)
    model = _Innermost().eval()
    adapter = adapter_for(model)
    batch = _batch(n=3)
    got = capture(adapter, batch)
    with torch.no_grad():
        x = model.embed(_patches(batch.inputs["pixel_values"]))  # (B, 16, d): each image's 4 windows
        folded = x.reshape(3, 4, 4, D).transpose(0, 1).reshape(12, 4, D)
        second = model.blocks[0](folded)
    assert got.x.shape == (3, 16, D)  # three images, not twelve
    torch.testing.assert_close(got.x, x)
    layer = got.layers[1]
    assert layer.attn_in is not None and layer.probs is not None and layer.x_in is not None
    windows = second.reshape(4, 3, 4, D).transpose(0, 1)  # (B, G, n, d), image b's own windows
    torch.testing.assert_close(layer.x_in, windows.reshape(3, 16, D))
    torch.testing.assert_close(layer.attn_in, model.blocks[1].norm(windows))
    w = adapter.layers[1].weights()
    a = layer.attn_in.double()
    q = torch.einsum("bgnc,hcd->bghnd", a, w.wq) + w.bq[:, None]  # type: ignore[index]
    k = torch.einsum("bgnc,hcd->bghnd", a, w.wk) + w.bk[:, None]  # type: ignore[index]
    p = (q @ k.transpose(-1, -2) / math.sqrt(D // HEADS)).softmax(-1)
    torch.testing.assert_close(layer.probs.double(), p, rtol=1e-5, atol=1e-6)


class _OddSize(nn.Module):
    """Runs only on 40×40 images: every trial size of the generic path fails."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(192, D)
        self.blocks = nn.ModuleList(ToyBlock(D, HEADS) for _ in range(2))

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        if pixel_values.shape[-1] != 40:
            raise ValueError("40×40 images only")
        x = self.embed(_patches(pixel_values))
        for blk in self.blocks:
            x = blk(x)
        return x


def test_a_failed_trial_forward_still_reports_x_x_l_and_w() -> None:
    torch.manual_seed(0)
    model = _OddSize().eval()
    adapter = adapter_for(model)
    assert [s.name for s in adapter.layers] == ["blocks.0", "blocks.1"]
    assert any("trial forward failed" in n and "40×40 images only" in n for n in adapter.notes)
    batch = _batch(40)
    got = capture(adapter, batch)
    with torch.no_grad():
        x = model.embed(_patches(batch.inputs["pixel_values"]))
        torch.testing.assert_close(got.x, x)
        torch.testing.assert_close(got.layers[1].x_in, model.blocks[0](x))
    torch.testing.assert_close(
        adapter.layers[0].weights().full("q"), model.blocks[0].attn.q.weight.T.double()
    )


def test_conditioning_reaches_the_unfolded_patches() -> None:
    """MobileViT: X is the map before unfolding; the first block reads X + λ·I_k's rows, unfolded."""
    model = vh.mobilevit()
    adapter = adapter_for(model)
    got = capture(adapter, _batch(), conditioning=Conditioning(5.0))
    assert got.x_conditioned is not None and got.x.shape == (2, 64, 16)
    first = got.layers[0].x_in
    assert first is not None
    for b in range(2):  # the same rows, in the block's own (unfolded) order
        mine = torch.sort(got.x_conditioned[b].flatten()).values
        torch.testing.assert_close(torch.sort(first[b].flatten()).values, mine)
    assert not torch.allclose(got.x_conditioned, got.x)


@pytest.mark.parametrize(
    ("build", "where", "said"),
    [
        (vt.twins, "blocks.0.0", "carries no position encoding: pos_block.0 runs only after that block"),
        (vh.coat, "cpe1", "(after the position encoding cpe1)"),
        (vh.tnt, "pos_drop", "(after the position embedding patch_pos)"),
        (vt.hiera, "blocks.0", "(after the position embedding pos_embed)"),
        (vh.levit, "stages.0.blocks.0", "positions enter inside attention (relative position bias)"),
    ],
)
def test_where_x_is_and_what_precedes_it(build: object, where: str, said: str) -> None:
    adapter = adapter_for(build())  # type: ignore[operator]
    point = adapter.embedding
    assert point.name == where and said in point.description
    assert point.after_position_encoding == ("after the position" in said)


def test_non_square_p_is_named() -> None:
    layers = adapter_for(vt.pvt_v2()).layers
    assert "K/V: spatially reduced (sr, stride 4×4)" in layers[0].attention
    assert "K/V" not in layers[1].attention  # sr_ratio 1: K/V are A_l's own tokens
    cross = adapter_for(vh.crossvit()).layers
    assert [s.name for s in cross] == [
        "blocks.0.blocks.0.0",
        "blocks.0.blocks.1.0",
        "blocks.0.fusion.0",
        "blocks.0.fusion.1",
    ]
    assert all("class token only" in s.attention for s in cross[2:])


def test_levit_conv_projections_fold_their_batchnorm_and_read_nchw() -> None:
    """LeViT with 1×1-conv projections (ConvNorm): W is the module's own fuse(), A_l its NCHW input as
    tokens, P = softmax(q kᵀ/√key_dim + attention biases) recomputed from them in float64."""
    kw = dict(
        embed_dim=(16, 24), key_dim=8, depth=(1, 1), num_heads=(2, 3), attn_ratio=(2, 2), mlp_ratio=(2, 2)
    )
    model = vt.tiny(vt.create("levit_conv_128s", img_size=64, **kw))
    adapter = adapter_for(model)
    batch = _batch(64)
    got = capture(adapter, batch, layers=[0])
    attn = model.stages[0].blocks[0].attn
    seen: list[torch.Tensor] = []
    handle = attn.register_forward_pre_hook(lambda _m, a: seen.append(a[0]))
    try:
        with torch.no_grad():
            model(batch.inputs["pixel_values"])
    finally:
        handle.remove()
    a = seen[0].flatten(2).transpose(1, 2).double()  # (B, N, c)
    layer = got.layers[0]
    assert layer.attn_in is not None and layer.probs is not None
    torch.testing.assert_close(layer.attn_in[:, 0].double(), a)
    fused = attn.qkv.fuse()
    w, b = fused.weight.flatten(1).double(), fused.bias.double()
    heads, kd, vd = attn.num_heads, attn.key_dim, attn.val_dim
    y = (a @ w.T + b).reshape(2, -1, heads, 2 * kd + vd).transpose(1, 2)  # per head [q | k | v]
    q, k = y[..., :kd], y[..., kd : 2 * kd]
    bias = attn.get_attention_biases(a.device).double()
    p = (q @ k.transpose(-1, -2) * kd**-0.5 + bias).softmax(-1)
    torch.testing.assert_close(layer.probs[:, 0].double(), p, rtol=1e-4, atol=1e-5)
    mine = adapter.layers[0].weights()
    rows = torch.arange(w.shape[0]).view(heads, -1)
    torch.testing.assert_close(mine.full("v"), w[rows[:, 2 * kd :].flatten()].T)


def test_hf_swin_p_is_the_returned_weights_per_image_and_window() -> None:
    """HF Swin returns one attention tensor per stage (its last block's, (B·windows, H, n, n)): the
    generic path's P of that block, windows grouped per image, is it."""
    from tests import vision_hf as hf

    model = hf.swin()
    adapter = adapter_for(model)
    batch = _batch()
    got = capture(adapter, batch)
    impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model(**batch.inputs, output_attentions=True)
    finally:
        model.set_attn_implementation(impl)
    probs = got.layers[len(adapter.layers) - 1].probs
    assert probs is not None and probs.shape == (2, 16, 2, 16, 16)
    torch.testing.assert_close(probs, out.attentions[-1].reshape(2, 16, 2, 16, 16))


def test_linear_map_reads_affine_modules_and_refuses_others() -> None:
    from condcli.adapters.generic.attn import linear_map

    lin = nn.Linear(4, 3)
    got = linear_map(lin)
    assert got is not None and got[0] is lin.weight
    # neither a linear map nor a wrapper of one: None, never a recursion through getattr(None, "linear")
    for other in (None, nn.Identity(), nn.ReLU(), object()):
        assert linear_map(other) is None
