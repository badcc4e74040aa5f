"""``images`` (issue 17, items 17 and 20): an image above Pillow's pixel limit is skipped from its header
(nothing decoded, no Pillow warning), a file that is not a readable image is named with why, every mode
becomes the 8-bit RGB the model's transform expects (16-bit grey scaled, not clipped to white), and a path
that is not a folder says what it is."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image, ImageFile

from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, Preprocessing, stream


def _identity() -> Preprocessing:
    """The RGB image itself as the 'pixels', so the test sees what the model's transform would get."""

    def transform(image: Any) -> torch.Tensor:
        assert image.mode == "RGB"
        return torch.from_numpy(np.asarray(image).copy())

    return Preprocessing("images", "identity", image_transform=transform)


def _save(path: Path, pixels: np.ndarray, mode: str | None = None) -> None:
    image = Image.fromarray(pixels)
    (image.convert(mode) if mode else image).save(path)


def _rgb(seed: int, size: int = 40) -> np.ndarray:
    return (np.random.default_rng(seed).random((size, size, 3)) * 255).astype(np.uint8)


def test_an_image_above_the_pixel_limit_is_skipped_from_its_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pillow's limit lowered to 1000 pixels: a 40×40 image (1600, where Pillow only warns and decodes) is
    skipped without a pixel decoded, named with its size, and no warning reaches the user."""
    _save(tmp_path / "big.png", _rgb(0))
    _save(tmp_path / "small.png", _rgb(1, size=20))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    decoded: list[str] = []
    real_load = ImageFile.ImageFile.load

    def load(self: Any) -> Any:
        decoded.append(Path(self.filename).name)
        return real_load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    inputs = stream(_identity(), InputSpec(images=tmp_path))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        names = [n for b in inputs for n in b.names]
    assert names == ["small.png"] and set(decoded) == {"small.png"}
    assert [str(w.message) for w in seen] == []
    why = "40×40 px: 0.0016 megapixels, above the 0.001 megapixels limit"
    assert inputs.notes() == [f"1 file(s) in {tmp_path} skipped: big.png ({why})"]


def test_16_bit_grey_is_scaled_not_clipped(tmp_path: Path) -> None:
    values = (np.arange(1600).reshape(40, 40) * 40).astype(np.uint16)
    _save(tmp_path / "g.png", values)
    (batch,) = list(stream(_identity(), InputSpec(images=tmp_path)))
    expected = np.round(values.astype(np.float64) * 255 / 65535).astype(np.uint8)  # float64 reference
    got = batch.inputs["pixel_values"][0].numpy()
    assert np.array_equal(got, np.repeat(expected[..., None], 3, axis=-1))


def test_float_pixels_in_0_1_are_scaled_and_others_skipped(tmp_path: Path) -> None:
    ramp = np.linspace(0, 1, 1600, dtype=np.float32).reshape(40, 40)
    Image.fromarray(ramp).save(tmp_path / "a.tif")
    Image.fromarray(ramp * 1000).save(tmp_path / "b.tif")
    inputs = stream(_identity(), InputSpec(images=tmp_path))
    (batch,) = list(inputs)
    assert batch.names == ["a.tif"]
    expected = np.round(ramp.astype(np.float64) * 255).astype(np.uint8)
    assert np.array_equal(batch.inputs["pixel_values"][0].numpy()[..., 0], expected)
    assert "b.tif (unreadable: floating-point pixels outside 0–1" in inputs.notes()[0]


def test_every_mode_becomes_rgb_like_pillows_own_conversion(tmp_path: Path) -> None:
    pixels = _rgb(2)
    _save(tmp_path / "cmyk.jpg", pixels, "CMYK")
    _save(tmp_path / "bits.png", pixels, "1")
    _save(tmp_path / "la.png", pixels, "LA")
    _save(tmp_path / "p.png", pixels, "P")
    frames = [Image.fromarray(_rgb(i)) for i in range(3)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    inputs = stream(_identity(), InputSpec(images=tmp_path, batch_size=10))
    (batch,) = list(inputs)
    assert batch.names == ["anim.gif", "bits.png", "cmyk.jpg", "la.png", "p.png"] and inputs.skipped == 0
    for name, got in zip(batch.names, batch.inputs["pixel_values"], strict=True):
        with Image.open(tmp_path / name) as im:  # the first frame, as Pillow converts it
            assert np.array_equal(got.numpy(), np.asarray(im.convert("RGB")))


def test_unreadable_files_are_named_with_why(tmp_path: Path) -> None:
    _save(tmp_path / "a.png", _rgb(3))
    whole = (tmp_path / "a.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "dangling.png").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "self").symlink_to(tmp_path)  # a symlinked folder is not entered: no endless walk
    inputs = stream(_identity(), InputSpec(images=tmp_path))
    assert [n for b in inputs for n in b.names] == ["a.png"]
    assert inputs.skipped == 4
    (note,) = inputs.notes()
    broken = "(a broken symbolic link)"
    assert note == (
        f"4 file(s) in {tmp_path} skipped: cut.png (unreadable: image file is truncated),"
        f" dangling.png {broken}, loop {broken} and 1 more"
    )
    os.remove(tmp_path / "a.png")
    with pytest.raises(InputError, match="no usable input") as e:
        list(stream(_identity(), InputSpec(images=tmp_path)))
    assert "notes.txt (not an image)" not in str(e.value) and "4 file(s) skipped: cut.png" in str(e.value)


def test_paths_that_are_not_folders_say_what_they_are(tmp_path: Path) -> None:
    (tmp_path / "one.png").write_bytes(b"x")
    with pytest.raises(InputError, match=r"images=.*one.png is a file, not a folder"):
        stream(_identity(), InputSpec(images=tmp_path / "one.png"))
    with pytest.raises(InputError, match="no such folder"):
        stream(_identity(), InputSpec(images=tmp_path / "missing"))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="is not a folder"):
        stream(_identity(), InputSpec(images=tmp_path / "fifo"))


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad\nname.png").write_text("not an image")
    with pytest.raises(InputError) as e:
        list(stream(_identity(), InputSpec(images=tmp_path)))
    assert "bad\\nname.png (not an image)" in str(e.value) and "\n" not in str(e.value)
