"""condcli.conditioning: λ·I_k and Theorem 4.4's X + C, per sample, as a module users can train with."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch

from condcli.adapters import adapter_for, condition_model
from condcli.capture import capture
from condcli.conditioning import (
    ConditionedEmbedding,
    Conditioning,
    correct_tokens,
    shift_tokens,
)
from condcli.errors import UsageError
from condcli.inputs.batches import Batch


def test_shift_adds_lambda_on_the_k_diagonal_of_each_real_sample() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    lengths = torch.tensor([5, 2, 0])
    out = shift_tokens(torch.from_numpy(x), 10.0, lengths).numpy()
    expected = x.copy()
    for b, n in enumerate([5, 2, 0]):
        for i in range(min(n, 4)):
            expected[b, i, i] += 10.0
    np.testing.assert_array_equal(out, expected)
    tall = rng.standard_normal((2, 3)).astype(np.float64)  # N < d: k = N
    np.testing.assert_array_equal(
        shift_tokens(torch.from_numpy(tall), 2.5).numpy(), tall + 2.5 * np.eye(2, 3)
    )


def test_correction_gives_singular_values_sigma1_plus_sigma_i() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 4))
    lengths = torch.tensor([7, 3])
    out = correct_tokens(torch.from_numpy(x), lengths).numpy()
    for b, n in enumerate([7, 3]):
        s = np.linalg.svd(x[b, :n], compute_uv=False)
        np.testing.assert_allclose(np.linalg.svd(out[b, :n], compute_uv=False), s[0] + s, rtol=1e-12)
        np.testing.assert_array_equal(out[b, n:], x[b, n:])  # padding untouched


def test_conditioning_validates_its_settings() -> None:
    with pytest.raises(UsageError, match="finite"):
        Conditioning(float("nan"))
    with pytest.raises(UsageError, match="unknown conditioning mode"):
        Conditioning(1.0, "scale")  # type: ignore[arg-type]


def test_conditioned_embedding_is_differentiable_and_trains() -> None:
    inner = torch.nn.Linear(6, 6)
    wrapped = ConditionedEmbedding(inner, lam=3.0)
    x = torch.randn(2, 4, 6)
    out = wrapped(x)
    torch.testing.assert_close(out, inner(x) + 3.0 * torch.eye(4, 6))
    out.square().sum().backward()
    assert inner.weight.grad is not None and torch.isfinite(inner.weight.grad).all()
    assert "X + 3·I_k" in repr(wrapped)


@pytest.mark.parametrize("mode", ["shift", "correction"])
def test_condition_model_changes_a_timm_vit_exactly_at_the_embedding_point(mode: str) -> None:
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, depth=2, img_size=32, patch_size=8
    ).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        x = model.pos_drop(model._pos_embed(model.patch_embed(images)))  # X by hand, (2, 17, 192)
        fixed = x + 10.0 * torch.eye(17, 192) if mode == "shift" else correct_tokens(x)
        expected = model.forward_head(model.norm(model.blocks(fixed)))
        condition_model(model, lam=10.0, mode=mode)  # type: ignore[arg-type]
        assert isinstance(model.pos_drop, ConditionedEmbedding)
        torch.testing.assert_close(model(images), expected)
    with pytest.raises(UsageError, match="already adds"):
        condition_model(model)


def test_conditioned_forward_in_capture_keeps_x_and_feeds_the_fixed_matrix() -> None:
    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, depth=2, img_size=32, patch_size=8
    ).eval()
    adapter = adapter_for(model)
    batch = Batch({"pixel_values": torch.randn(2, 3, 32, 32)}, None, ["a", "b"])
    plain = capture(adapter, batch, probes=("x_in",))
    cond = capture(adapter, batch, probes=("x_in",), conditioning=Conditioning(10.0))
    torch.testing.assert_close(cond.x, plain.x, rtol=0, atol=0)
    assert cond.x_conditioned is not None
    torch.testing.assert_close(cond.layers[0].x_in, plain.x + 10.0 * torch.eye(17, 192))
    torch.testing.assert_close(cond.x_conditioned, cond.layers[0].x_in)
    assert not torch.allclose(cond.layers[1].x_in, plain.layers[1].x_in)  # the fix propagates
