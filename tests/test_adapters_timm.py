"""timm family adapters (ViT, DeiT, Swin, XCiT, DaViT) against independent references.

Every expected value here is computed by the test itself (the cases and references are in timm_cases.py),
from the model's own modules called without hooks (or timm's ``forward_intermediates``) and from explicit
float64 formulas — never from condcli's output. Models are tiny random-init timm models; fused attention is
switched ON before each capture so that condcli has to turn it off (to see P) and turn it back on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from condcli.capture import Capture, capture
from condcli.conditioning import Conditioning
from condcli.errors import InputError
from tests.timm_cases import (
    CASES,
    FAMILY,
    LAM,
    B,
    Case,
    close,
    expected_slices,
    flag_modules,
    make_case,
    recording,
    ref_output,
    ref_probs,
)


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return make_case(request.param)


@pytest.fixture(scope="module")
def captured(case: Case) -> tuple[Capture, list[torch.Tensor | None]]:
    """One capture of every layer, with the test's own hooks recording each attention module's output."""
    with recording([r.attn for r in case.ref.layers]) as outs:
        cap = capture(case.adapter, case.batch, to_end=True)  # every attention module's output recorded
    return cap, list(outs)


# ------------------------------------------------------------------------------------------------ tests


def test_family_and_layers(case: Case) -> None:
    a = case.adapter
    assert a.family == FAMILY[case.key]
    assert a.input_kind == "images"
    assert [s.name for s in a.layers] == [r.name for r in case.ref.layers]
    assert [s.index for s in a.layers] == list(range(len(case.ref.layers)))
    for spec, ref in zip(a.layers, case.ref.layers, strict=True):
        assert spec.probs is not None
        assert spec.heads == spec.weights().heads
        assert spec.heads == getattr(ref.attn, "num_heads", getattr(ref.attn, "groups", None))


def test_attention_labels(case: Case) -> None:
    labels = [s.attention for s in case.adapter.layers]
    if case.key.startswith("swin"):
        blocks = [b for st in case.model.layers for b in st.blocks]
        for label, blk in zip(labels, blocks, strict=True):
            wh, ww = blk.window_size
            assert label.startswith(f"softmax in {wh}×{ww} windows")
            assert label.endswith("(shifted)") == bool(any(blk.shift_size))
        assert any("(shifted)" in lab for lab in labels)
    elif case.key == "xcit":
        assert all("XCA" in lab and "8×8" in lab for lab in labels)  # d_h = 32 / 4
    elif case.key.startswith("davit"):
        assert labels[0] == "softmax in 3×3 windows"
        assert "channel" in labels[1] and "recomputed from qkv" in labels[1] and "8×8" in labels[1]
        assert "channel" in labels[3] and "8×8" in labels[3]  # stage 1: 32 channels / 4 heads
        assert "Kᵀ V" in labels[1] if case.key == "davit" else "Qᵀ K / √N" in labels[1]
    else:
        assert labels == ["softmax over all tokens"] * 2


def test_embedding_point(case: Case) -> None:
    e = case.adapter.embedding
    expected = {
        "timm-vit": ("pos_drop", "tokens", True),
        "timm-swin": ("patch_embed", "nhwc", False),
        "timm-xcit": ("pos_drop", "tokens", True),
        "timm-davit": ("stages.0.blocks.0.0.cpe1", "nchw", True),
    }[FAMILY[case.key]]
    if case.key == "davit_v2":
        expected = ("stages.0.blocks.0.spatial_block.cpe1", "nchw", True)
    assert (e.name, e.layout, e.after_position_encoding) == expected
    assert case.model.get_submodule(e.name) is e.module
    if FAMILY[case.key] == "timm-swin":
        assert "relative position" in e.description


def test_notes(case: Case) -> None:
    notes = " | ".join(case.adapter.notes)
    if case.key == "xcit":
        assert "cls_attn_blocks" in notes and "not analysed" in notes
    if case.key == "swin_pad":
        assert "layers.0.blocks.0 (6×6 in 4×4 windows)" in notes
    if case.key == "swin":
        assert "zero padding" not in notes
    if case.key == "davit":
        assert "k, v, q slices" in notes


def test_x_matches_the_model_own_embedding(case: Case, captured: tuple[Capture, Any]) -> None:
    cap, _ = captured
    assert cap.x.shape == case.ref.x.shape
    close(cap.x, case.ref.x, rtol=1e-6, atol=1e-6)
    assert cap.x_conditioned is None


def test_layer_inputs_match_blocks_called_directly(case: Case, captured: tuple[Capture, Any]) -> None:
    cap, _ = captured
    assert sorted(cap.layers) == list(range(len(case.ref.layers)))
    assert cap.layers[0].x_in is not None
    close(cap.layers[0].x_in, case.ref.x, rtol=1e-6, atol=1e-6)
    for i, (xl, al) in enumerate(zip(case.ref.x_layers, case.ref.a_layers, strict=True)):
        lc = cap.layers[i]
        assert lc.x_in is not None and lc.attn_in is not None
        assert lc.x_in.shape == xl.shape, f"layer {i}"
        assert lc.attn_in.shape == al.shape, f"layer {i}"
        close(lc.x_in, xl)
        close(lc.attn_in, al)


def test_window_shapes(case: Case, captured: tuple[Capture, Any]) -> None:
    cap, _ = captured
    shapes = []
    for i in sorted(cap.layers):
        a, p = cap.layers[i].attn_in, cap.layers[i].probs
        assert a is not None and p is not None
        shapes.append((tuple(a.shape), tuple(p.shape)))
    if case.key == "swin":  # 16×16 map → 16 windows of 16 tokens (C 16, H 2); 8×8 → 4 (C 32, H 4)
        assert (
            shapes == [((B, 16, 16, 16), (B, 16, 2, 16, 16))] * 2 + [((B, 4, 16, 32), (B, 4, 4, 16, 16))] * 2
        )
    elif case.key == "swin_pad":  # 6×6 padded to 8×8 → 4 windows
        assert shapes == [((B, 4, 16, 16), (B, 4, 2, 16, 16))] * 2
    elif case.key == "xcit":  # 16 tokens, C 32, 4 heads of 8 channels
        assert shapes == [((B, 1, 16, 32), (B, 1, 4, 8, 8))] * 2
    elif case.key.startswith("davit"):  # 8×8 → 9 windows of 9; 4×4 → 4 windows of 9
        assert shapes == [
            ((B, 9, 9, 16), (B, 9, 2, 9, 9)),
            ((B, 1, 64, 16), (B, 1, 2, 8, 8)),
            ((B, 4, 9, 32), (B, 4, 4, 9, 9)),
            ((B, 1, 16, 32), (B, 1, 4, 8, 8)),
        ]
    else:  # ViT 16 patches + 1 class token; DeiT distilled + 1 distillation token
        n = 17 if case.key == "vit" else 18
        assert shapes == [((B, 1, n, 32), (B, 1, 2, n, n))] * 2


def test_head_weights_recombine_to_qkv(case: Case) -> None:
    for spec, ref in zip(case.adapter.layers, case.ref.layers, strict=True):
        w = spec.weights()
        parts = expected_slices(ref)
        for role in "qkv":
            full = w.full(role)  # type: ignore[arg-type]
            assert full.dtype == torch.float64
            close(full, parts[role][0], rtol=0, atol=0)
        for role, b in zip("qkv", (w.bq, w.bk, w.bv), strict=True):
            expected_b = parts[role][1]
            assert (b is None) == (expected_b is None)
            if b is not None:
                assert expected_b is not None
                close(b.reshape(-1), expected_b, rtol=0, atol=0)
        assert w.wq.shape == (spec.heads, ref.qkv.in_features, ref.qkv.out_features // 3 // spec.heads)


def test_probs_are_softmax_rows(captured: tuple[Capture, Any]) -> None:
    cap, _ = captured
    for lc in cap.layers.values():
        assert lc.probs is not None
        assert bool((lc.probs >= 0).all())
        close(lc.probs.sum(-1), torch.ones(lc.probs.shape[:-1]), rtol=0, atol=1e-5)


def test_probs_match_float64_recomputation(case: Case, captured: tuple[Capture, Any]) -> None:
    cap, _ = captured
    for i, (spec, ref) in enumerate(zip(case.adapter.layers, case.ref.layers, strict=True)):
        lc = cap.layers[i]
        assert lc.attn_in is not None and lc.probs is not None
        expected = ref_probs(ref, lc.attn_in.to(torch.float64), spec.weights())
        assert lc.probs.shape == expected.shape, spec.name
        close(lc.probs, expected, rtol=1e-4, atol=1e-5)


def test_attention_output_rebuilt_from_p_and_v(case: Case, captured: tuple[Capture, Any]) -> None:
    """Proves the captured (for DaViT channel blocks: recomputed) P is the one the model used."""
    cap, outs = captured
    for i, (spec, ref) in enumerate(zip(case.adapter.layers, case.ref.layers, strict=True)):
        lc = cap.layers[i]
        assert lc.attn_in is not None and lc.probs is not None
        out = outs[i]
        assert out is not None
        rebuilt = ref_output(ref, lc.probs.to(torch.float64), lc.attn_in.to(torch.float64), spec.weights())
        close(out.reshape(rebuilt.shape), rebuilt, rtol=1e-4, atol=1e-5)
        # and P is not trivially uniform: it is informative for this check
        assert float((lc.probs - lc.probs.mean(-1, keepdim=True)).abs().max()) > 1e-4


def test_fused_flags_restored_and_no_hooks_left(
    case: Case, captured: tuple[Capture, Any], hook_count: Callable[[nn.Module], int]
) -> None:
    flags = flag_modules(case.model)
    assert flags and all(m.fused_attn is True for m in flags)  # set True by the fixture, restored after
    assert hook_count(case.model) == 0
    assert {id(m) for m, _ in case.adapter.fused_flags} == {id(m) for m in flags}


def test_failed_forward_leaves_no_hooks_and_restores_flags(
    case: Case, hook_count: Callable[[nn.Module], int]
) -> None:
    model, img = case.model, case.batch.inputs["pixel_values"]
    with torch.no_grad():
        before = model(img)
    block = case.model.get_submodule(case.ref.layers[1].name)
    seen_flags: list[bool] = []

    def boom(_m: nn.Module, _a: Any) -> None:
        seen_flags.extend(bool(m.fused_attn) for m in flag_modules(model))
        raise RuntimeError("boom in block 1")

    handle = block.register_forward_pre_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="boom in block 1"):
            capture(case.adapter, case.batch)
    finally:
        handle.remove()
    assert seen_flags and not any(seen_flags)  # fused attention was off during the capture
    assert hook_count(model) == 0
    assert all(m.fused_attn is True for m in flag_modules(model))
    with torch.no_grad():
        after = model(img)
    assert torch.equal(before, after)


def test_conditioning_shifts_the_first_block_input(
    case: Case, hook_count: Callable[[nn.Module], int]
) -> None:
    model = case.model
    n, d = case.ref.x.shape[1:]
    expected = case.ref.x + LAM * torch.eye(n, d)
    consumed: list[torch.Tensor] = []
    convert = case.ref.consumer_tokens

    def grab(_m: nn.Module, args: Any) -> None:
        consumed.append(convert(args[0].detach()))

    handle = case.ref.consumer.register_forward_pre_hook(grab)
    try:
        cap = capture(case.adapter, case.batch, conditioning=Conditioning(LAM), to_end=True)
    finally:
        handle.remove()
    assert len(consumed) == 1
    close(consumed[0], expected, rtol=1e-6, atol=1e-5)  # the model really ran on X + λ·I_k
    close(cap.x, case.ref.x, rtol=1e-6, atol=1e-6)  # capture.x stays the unconditioned X
    assert cap.x_conditioned is not None
    close(cap.x_conditioned, expected, rtol=1e-6, atol=1e-5)
    assert cap.layers[0].x_in is not None
    close(cap.layers[0].x_in, expected, rtol=1e-6, atol=1e-5)
    with torch.no_grad():
        plain = model(case.batch.inputs["pixel_values"])
    assert not torch.allclose(cap.output, plain)
    assert hook_count(model) == 0


def test_last_layer_only_and_out_of_range(case: Case, hook_count: Callable[[nn.Module], int]) -> None:
    last = len(case.ref.layers) - 1
    cap = capture(case.adapter, case.batch, layers=[-1])
    assert list(cap.layers) == [last]
    lc = cap.layers[last]
    assert lc.x_in is not None and lc.attn_in is not None and lc.probs is not None
    close(lc.x_in, case.ref.x_layers[last])
    for bad in ([last + 1], [-(last + 2)]):
        with pytest.raises(InputError):
            capture(case.adapter, case.batch, layers=bad)
    assert hook_count(case.model) == 0


def test_matches_only_its_own_family(case: Case) -> None:
    from condcli.adapters import timm_davit, timm_swin, timm_vit, timm_xcit

    modules = {"timm-vit": timm_vit, "timm-swin": timm_swin, "timm-xcit": timm_xcit, "timm-davit": timm_davit}
    assert [k for k, mod in modules.items() if mod.matches(case.model)] == [FAMILY[case.key]]
    assert not any(mod.matches(nn.Linear(2, 2)) for mod in modules.values())
