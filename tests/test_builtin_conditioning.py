"""A model trained with conditioned tokens: X is taken before its own shift, the blocks see X + λ·I_k, and
the shift is re-applied from metadata.json when such a folder is loaded (the shift has no weights).
"""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
import timm
import torch

from condcli.adapters import adapter_for, condition_model
from condcli.capture import capture
from condcli.conditioning import ConditionedEmbedding, Conditioning
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Batch
from condcli.loading.samples import builtin_conditioning
from condcli.loading.sources import LoadOptions, load
from tests.toy_models import ToyModel

TINY = "vit_tiny_patch16_224"


def tiny_vit() -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model(TINY, pretrained=False, depth=2, img_size=32, patch_size=8).eval()


def pixels() -> Batch:
    torch.manual_seed(1)
    return Batch({"pixel_values": torch.randn(2, 3, 32, 32)}, None, ["a", "b"])


def test_x_is_taken_before_the_models_own_shift() -> None:
    plain, conditioned = tiny_vit(), condition_model(tiny_vit(), lam=7.0)
    adapter = adapter_for(conditioned)
    assert adapter.embedding.name == "pos_drop.inner"
    assert adapter.builtin == Conditioning(7.0) and "X + 7·I_k" in adapter.notes[0]
    with pytest.raises(FrozenInstanceError):  # known when built, never patched in afterwards
        adapter.builtin = None  # type: ignore[misc]
    got = capture(adapter, pixels(), probes=("x_in",), to_end=True)
    ref = capture(adapter_for(plain), pixels(), probes=("x_in",), to_end=True)
    torch.testing.assert_close(got.x, ref.x, rtol=0, atol=0)  # X: the same tokens as the plain model's
    x0 = got.layers[0].x_in
    assert x0 is not None
    torch.testing.assert_close(x0, got.x + 7.0 * torch.eye(17, 192))  # what the blocks see
    assert not torch.equal(got.output, ref.output)


def test_conditioning_twice_is_refused() -> None:
    model = condition_model(tiny_vit(), lam=10.0)
    with pytest.raises(UsageError, match="already adds X \\+ 10·I_k"):
        condition_model(model, lam=10.0)
    with pytest.raises(UsageError, match="already adds"):
        capture(adapter_for(model), pixels(), conditioning=Conditioning(10.0))


def test_a_model_whose_x_is_a_block_input_is_not_wrapped_silently() -> None:
    model = ToyModel().eval()
    with pytest.raises(UsageError, match="forward pre-hook"):
        condition_model(model, lam=10.0)
    assert not any(isinstance(m, ConditionedEmbedding) for m in model.modules())


def _folder(tmp_path: Path, conditioning: object) -> Path:
    from timm.models import save_for_hf

    folder = tmp_path / "m"
    save_for_hf(tiny_vit(), str(folder), safe_serialization=True)
    (folder / "metadata.json").write_text(json.dumps({"conditioning": conditioning}))
    return folder


def test_loading_a_folder_reapplies_the_recorded_conditioning(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"lambda": 4.0, "mode": "shift"})
    loaded = load(str(folder), LoadOptions(device="cpu"))
    assert isinstance(loaded.model.pos_drop, ConditionedEmbedding)
    assert loaded.adapter.builtin == Conditioning(4.0)
    assert any("λ = 4" in n for n in loaded.notes)
    with torch.no_grad():
        ref = condition_model(tiny_vit(), lam=4.0)(pixels().inputs["pixel_values"])
        got = loaded.model(pixels().inputs["pixel_values"])
    torch.testing.assert_close(got, ref)


@pytest.mark.parametrize(
    "conditioning",
    [{"lambda": "ten"}, {"lambda": 1.0, "mode": "double"}, 10, {"mode": "shift"}, {"lambda": True}],
)
def test_malformed_conditioning_metadata_is_one_clear_error(tmp_path: Path, conditioning: object) -> None:
    folder = _folder(tmp_path, conditioning)
    with pytest.raises(InputError, match="'conditioning' must be"):
        load(str(folder), LoadOptions(device="cpu"))


def test_metadata_that_is_not_json_is_one_clear_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    assert builtin_conditioning(folder) is None
    (folder / "metadata.json").write_text("{not json")
    with pytest.raises(InputError, match=r"metadata\.json: invalid JSON"):
        builtin_conditioning(folder)
