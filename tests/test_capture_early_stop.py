"""The forward stops once everything asked for has been seen (issue 18 item 5: spend no forward where nothing
is read): the blocks after the last chosen layer and the model's head never run, the captured tensors are
entry for entry those of the whole forward, hooks and taps are gone, fused attention is restored, a model's
own ``except Exception`` does not swallow the stop, and an offloaded block it stopped in is offloaded again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import Result
from torch import nn

from condcli.analysis import driver
from condcli.capture import PROBES, capture
from condcli.conditioning import Conditioning
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadedModel, LoadOptions, load
from tests.recording import assert_same_capture


@pytest.fixture(scope="module")
def vit() -> LoadedModel:
    return load("vit-plain")


def _batch(loaded: LoadedModel, n: int = 2) -> Any:
    return next(iter(stream(loaded.preprocessing, InputSpec(max_samples=n, batch_size=n))))


@contextmanager
def _calls(modules: dict[str, nn.Module]) -> Iterator[dict[str, int]]:
    """How many times each module's forward ran."""
    count = dict.fromkeys(modules, 0)

    def bump(key: str) -> Callable[..., None]:
        return lambda m, a: count.__setitem__(key, count[key] + 1)

    handles = [m.register_forward_pre_hook(bump(k)) for k, m in modules.items()]
    try:
        yield count
    finally:
        for h in handles:
            h.remove()


def _vit_parts(model: Any) -> dict[str, nn.Module]:
    parts = {f"block{i}": b for i, b in enumerate(model.blocks)}
    parts |= {f"mlp{i}": b.mlp for i, b in enumerate(model.blocks)}
    return parts | {"norm": model.norm, "head": model.head}


@pytest.mark.parametrize(
    ("layers", "probes", "ran"),
    [
        (None, PROBES, -1),  # all layers (-1): the last MLP, the final norm and the head are spared
        ([0], PROBES, 1),
        ([0, 2], ("x_in", "attn_in"), 3),  # fused attention (no P) stops as well
        ([], PROBES, 0),  # X alone: no block runs
        ([1], (), 0),  # no probe asked for: X alone
    ],
)
def test_the_forward_stops_after_the_last_probe_asked_for(
    vit: LoadedModel,
    hook_count: Callable[[nn.Module], int],
    layers: list[int] | None,
    probes: tuple[str, ...],
    ran: int,
) -> None:
    model: Any = vit.model
    batch = _batch(vit)
    parts = _vit_parts(model)
    with _calls(parts) as early:
        got = capture(vit.adapter, batch, layers=layers, probes=probes)
    with _calls(parts) as whole:
        ref = capture(vit.adapter, batch, layers=layers, probes=probes, to_end=True)
    blocks = len(model.blocks)
    ran = blocks if ran < 0 else ran
    assert whole == dict.fromkeys(parts, 1)  # to_end: the whole model ran, once per module
    assert [early[f"block{i}"] for i in range(blocks)] == [1] * ran + [0] * (blocks - ran)
    assert early["head"] == early["norm"] == 0
    assert early[f"mlp{blocks - 1}"] == 0  # not even the MLP of the last block analysed
    assert got.output is None and ref.output is not None
    with torch.no_grad():  # to_end's output is the model's own (eager attention: the last digits differ)
        own = model(batch.inputs["pixel_values"])
    torch.testing.assert_close(ref.output, own, rtol=1e-5, atol=1e-5)
    assert_same_capture(got, ref)
    assert hook_count(model) == 0
    assert all(b.attn.fused_attn for b in model.blocks)  # switched back on after the stop


def test_the_conditioned_forward_stops_too_and_keeps_x_plus_lambda(vit: LoadedModel) -> None:
    batch = _batch(vit)
    parts = _vit_parts(vit.model)
    for layers in ([], [0, 3]):
        with _calls(parts) as early:
            got = capture(vit.adapter, batch, layers=layers, conditioning=Conditioning(10.0))
        ref = capture(vit.adapter, batch, layers=layers, conditioning=Conditioning(10.0), to_end=True)
        assert early["block4"] == 0 and early["head"] == 0
        assert got.x_conditioned is not None
        assert torch.equal(got.x_conditioned, got.x + 10.0 * torch.eye(*got.x.shape[-2:]))
        assert_same_capture(got, ref)


def test_a_models_own_except_exception_does_not_swallow_the_stop(
    vit: LoadedModel, hook_count: Callable[[nn.Module], int]
) -> None:
    """condcli's stop is a BaseException: a model that catches every Exception around its blocks (and
    would go on with a fallback) never sees it."""
    model: Any = vit.model
    swallowed: list[BaseException] = []
    plain = model.forward_features

    def guarded(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        try:
            out: torch.Tensor = plain(x, *args, **kwargs)
        except Exception as e:  # what a defensive user model does
            swallowed.append(e)
            return x
        return out

    model.forward_features = guarded
    try:
        batch = _batch(vit)
        got = capture(vit.adapter, batch, layers=[1])
        ref = capture(vit.adapter, batch, layers=[1], to_end=True)
    finally:
        del model.forward_features
    assert swallowed == []
    assert_same_capture(got, ref)
    assert hook_count(model) == 0


def test_a_forward_that_raises_before_the_stop_still_raises(vit: LoadedModel) -> None:
    """The stop is caught, nothing else: a model's own error in a block before the last probe surfaces."""
    model: Any = vit.model

    def boom(_m: nn.Module, _a: Any) -> None:
        raise RuntimeError("boom in block 1")

    handle = model.blocks[1].register_forward_pre_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="boom in block 1"):
            capture(vit.adapter, _batch(vit), layers=[2])
        capture(vit.adapter, _batch(vit), layers=[0])  # stops before block 1: never reaches it
    finally:
        handle.remove()


def test_a_swin_window_attention_it_stopped_in_is_offloaded_again(tmp_path: Path) -> None:
    """An offloaded block's weights are loaded as the block starts and offloaded as it ends; the stop comes
    from P inside the block, before its end. Its weights (here the window attention's relative position bias
    table) go back to ``meta`` all the same, and the next captures are still the unsplit ones."""
    (tmp_path / "swin.py").write_text(
        "import timm\n\n\ndef build():\n"
        "    return timm.create_model('swin_tiny_patch4_window7_224', img_size=32, patch_size=4,"
        " embed_dim=32, depths=(2, 2), num_heads=(2, 4), window_size=4, num_classes=0)\n"
    )
    model = f"{tmp_path / 'swin.py'}:build"
    loaded = load(model, LoadOptions(device_map="sequential", max_memory="cpu=300000,disk"))
    whole = load(model)
    modules = loaded.device_map["modules"] if loaded.device_map else {}
    assert "disk" in modules.values(), modules
    last = len(loaded.adapter.layers) - 1
    attn: Any = loaded.model.get_submodule(loaded.adapter.layers[last].name).attn

    def table() -> str:  # accelerate replaces the parameter as it loads and offloads it: read it afresh
        return str(attn.relative_position_bias_table.device.type)

    assert table() == "meta"  # offloaded: loaded only while its block runs
    batch = _batch(whole, 2)
    for layers in ([last], [last], [0, last]):
        got = capture(loaded.adapter, batch, layers=layers)
        assert table() == "meta"
        assert_same_capture(got, capture(whole.adapter, batch, layers=layers))


def _report(cli: Callable[..., Result], *args: str) -> dict[str, Any]:
    result = cli(*args, "--max-samples", "3", "--batch-size", "2", "--json")
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize(
    "args",
    [
        ("spectrum", "vit-plain", "--layers", "0,2"),  # the conditioned forward too (the default)
        ("spectrum", "gpt2-docstrings"),
        ("sweep-lambda", "vit-plain", "--range", "1", "3", "--steps", "3", "--layers", "1"),
        ("rank-decay", "bert-docstrings", "--layers", "1"),
    ],
)
def test_reports_are_those_of_the_whole_forward(
    cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    early = _report(cli, *args)
    monkeypatch.setattr(driver, "capture", functools.partial(capture, to_end=True))
    assert _report(cli, *args) == early
