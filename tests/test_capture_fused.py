"""Eager attention only where P is captured (issue 18 item 5): X_l and A_l alone come from the model's own
fused forward, entry for entry what its blocks receive; asking for P still switches fused attention off."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from condcli.capture import capture
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadedModel, load


@pytest.fixture(scope="module")
def vit() -> LoadedModel:
    return load("vit-plain")


@pytest.fixture(scope="module")
def bert() -> LoadedModel:
    return load("bert-docstrings")


def _first_batch(loaded: LoadedModel, n: int = 3) -> Any:
    return next(iter(stream(loaded.preprocessing, InputSpec(max_samples=n, batch_size=n))))


def _vit_reference(model: Any, pixels: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor], list]:
    """What each block and its attention receive in the model's own forward (its default, fused attention),
    from the test's own hooks; and the fused flags each attention saw while it ran."""
    xs: list[torch.Tensor] = []
    attn: list[torch.Tensor] = []
    flags: list[bool] = []
    handles = []

    def on_attn(m: nn.Module, a: tuple[Any, ...]) -> None:  # a pre-hook returning a value would replace args
        attn.append(a[0].detach().clone())
        flags.append(bool(m.fused_attn))

    for block in model.blocks:
        handles.append(block.register_forward_pre_hook(lambda m, a: xs.append(a[0].detach().clone())))
        handles.append(block.attn.register_forward_pre_hook(on_attn))
    try:
        with torch.no_grad():
            model(pixels)
    finally:
        for h in handles:
            h.remove()
    return xs, attn, flags


def _seen_flags(model: nn.Module) -> tuple[list[bool], list[Any]]:
    """Hooks that note each attention's fused flag while the forward runs."""
    seen: list[bool] = []
    handles = [
        m.register_forward_pre_hook(lambda mod, a: seen.append(bool(mod.fused_attn)))
        for m in model.modules()
        if isinstance(getattr(m, "fused_attn", None), bool)
    ]
    return seen, handles


def test_x_layers_alone_run_the_fused_forward_and_equal_what_the_blocks_receive(vit: LoadedModel) -> None:
    model: Any = vit.model
    assert all(b.attn.fused_attn for b in model.blocks)  # the sample ViT's own default
    batch = _first_batch(vit)
    pixels = batch.inputs["pixel_values"]
    xs, attn, flags = _vit_reference(model, pixels)
    assert all(flags)
    seen, handles = _seen_flags(model)
    try:
        got = capture(vit.adapter, batch, probes=("x_in", "attn_in"))
    finally:
        for h in handles:
            h.remove()
    assert seen and all(seen)  # fused attention was never switched off
    for i, layer in got.layers.items():
        assert layer.probs is None
        assert layer.x_in is not None and torch.equal(layer.x_in, xs[i])
        assert layer.attn_in is not None and torch.equal(layer.attn_in[:, 0], attn[i])


def test_asking_for_p_switches_to_eager_and_back(vit: LoadedModel) -> None:
    model: Any = vit.model
    batch = _first_batch(vit)
    seen, handles = _seen_flags(model)
    try:
        got = capture(vit.adapter, batch, probes=("x_in", "probs"), layers=[0, -1])
    finally:
        for h in handles:
            h.remove()
    assert seen and not any(seen)  # eager: P is materialised
    assert all(layer.probs is not None for layer in got.layers.values())
    assert all(b.attn.fused_attn for b in model.blocks)  # restored
    seen, handles = _seen_flags(model)
    try:
        # no layer: X only (run to the end, so that the blocks' attention runs and shows its flag)
        capture(vit.adapter, batch, probes=("x_in", "attn_in", "probs"), layers=[], to_end=True)
    finally:
        for h in handles:
            h.remove()
    assert seen and all(seen)


def test_hf_x_layers_alone_keep_the_models_attention_and_equal_its_hidden_states(bert: LoadedModel) -> None:
    model: Any = bert.model
    impl = model.config._attn_implementation
    assert impl != "eager"  # the shipped BERT loads with its default (sdpa) attention
    batch = _first_batch(bert)
    with torch.no_grad():
        ref = model(**batch.inputs, output_hidden_states=True).hidden_states
    seen: list[str] = []
    h = model.encoder.layer[0].register_forward_pre_hook(
        lambda m, a: seen.append(model.config._attn_implementation)
    )
    try:
        got = capture(bert.adapter, batch, probes=("x_in",))
    finally:
        h.remove()
    assert seen == [impl]
    for i, layer in got.layers.items():
        assert layer.x_in is not None and torch.equal(layer.x_in, ref[i])
    assert model.config._attn_implementation == impl
