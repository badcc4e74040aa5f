"""preprocessor_config.json of a model folder (the image processor, the audio feature extractor): absent →
the library's defaults, said so; present but broken → one InputError naming the file (it was taken for
absent, and the report said "the model has no preprocessor config"); loadable but unable to preprocess an
image (a negative size) → one InputError, not an internal error at the first batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from condcli.errors import InputError
from condcli.inputs.preprocessing import hf_image_preprocessing
from condcli.inputs.preprocessing_av import hf_audio_preprocessing


def _vit_config():  # type: ignore[no-untyped-def]
    from transformers import ViTConfig

    return ViTConfig(image_size=32, patch_size=8)


def test_an_intact_image_processor_is_the_models_own(tmp_path: Path) -> None:
    from transformers import ViTImageProcessor

    own = ViTImageProcessor(size={"height": 40, "width": 40}, image_mean=[0.1, 0.2, 0.3])
    own.save_pretrained(tmp_path)
    pre = hf_image_preprocessing(tmp_path, _vit_config())
    image = Image.fromarray((np.random.default_rng(0).random((50, 60, 3)) * 255).astype(np.uint8))
    assert pre.image_transform is not None
    assert torch.equal(pre.image_transform(image), own(image, return_tensors="pt")["pixel_values"][0])
    assert pre.describe == f"ViTImageProcessor from {tmp_path}"


def test_no_preprocessor_config_means_the_defaults_said_so(tmp_path: Path) -> None:
    pre = hf_image_preprocessing(tmp_path, _vit_config())
    assert "the model has no preprocessor config" in pre.describe


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("garbage", "cannot be loaded (preprocessor_config.json: invalid JSON at line 1, column 1"),
        ("", "cannot be loaded (preprocessor_config.json: invalid JSON"),
        ('{"image_processor_type": "NoSuchProcessor"}', "cannot be loaded (preprocessor_config.json: "),
        (
            '{"image_processor_type": "ViTImageProcessor", "size": {"height": -3, "width": 0}}',
            "(preprocessor_config.json) loads but cannot preprocess an image",
        ),
    ],
)
def test_a_broken_image_processor_is_one_error_naming_the_file(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "preprocessor_config.json").write_text(text)
    with pytest.raises(InputError) as e:
        hf_image_preprocessing(tmp_path, _vit_config())
    assert says in e.value.message and str(tmp_path) in e.value.message
    assert "remove it to use" in (e.value.hint or "")
    assert len(e.value.line()) < 600


def test_a_broken_feature_extractor_is_one_error_naming_the_file(tmp_path: Path) -> None:
    from transformers import WhisperConfig

    (tmp_path / "preprocessor_config.json").write_text("{not json")
    with pytest.raises(
        InputError, match=r"the feature extractor in .* cannot be loaded \(preprocessor_config.json"
    ):
        hf_audio_preprocessing(tmp_path, WhisperConfig(num_mel_bins=80))
    (tmp_path / "preprocessor_config.json").unlink()
    pre = hf_audio_preprocessing(tmp_path, WhisperConfig(num_mel_bins=80))
    assert pre.describe.startswith("WhisperFeatureExtractor defaults")
