"""Image files → RGB images for the model's own transforms; a file that cannot be one is skipped, with why.

Every format and mode Pillow reads becomes 8-bit RGB as the model's preprocessing expects: 16-bit grey is
scaled (65535 → 255) instead of clipped to white, an animated image gives its first frame. An image above
Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``, 89 megapixels by default) is skipped
from its header, before any pixel is decoded: decoding is the only cost that grows with the file, and a
cheaper decode (JPEG's ``draft``) would hand the model's transform other pixels than the file's. Pillow's
own warnings about a file (decompression bomb, corrupt EXIF, palette transparency) are not printed: the
file is judged here, and a skipped file is named in the run's notes.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from condcli.errors import InputError, one_line
from condcli.outpaths import kind

HIGH_DEPTH = ("I;16", "I;16L", "I;16B", "I;16N")  # 16-bit grey
EXAMPLES = 3  # skipped files named in notes and hints


@dataclass
class Skipped:
    """Files skipped so far: how many, and the first few with why."""

    count: int = 0
    names: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, name: str, why: str) -> None:
        self.count += 1
        if len(self.names) < EXAMPLES:
            self.names.append(one_line(name))  # a newline in a file name must not break the note
            self.reasons.append(why)

    def examples(self) -> str:
        """``a.png (truncated), b.txt (not an image)``, and how many more."""
        shown = ", ".join(f"{n} ({w})" for n, w in zip(self.names, self.reasons, strict=True))
        more = self.count - len(self.names)
        return shown + (f" and {more} more" if more > 0 else "")


def _megapixels(pixels: float) -> str:
    return f"{pixels / 1e6:.3g} megapixels"


def _to_rgb(im: Any) -> Any:
    """8-bit RGB of an opened image (decoded here); high-depth grey scaled, not clipped."""
    from PIL import Image

    if im.mode in HIGH_DEPTH or im.mode in ("I", "F"):
        values = np.asarray(im)
        scaled: np.ndarray
        if im.mode == "F":
            if not (np.isfinite(values).all() and values.min() >= 0 and values.max() <= 1):
                raise ValueError("floating-point pixels outside 0–1: convert it to an 8- or 16-bit image")
            scaled = np.round(values.astype(np.float64) * 255)
        elif im.mode == "I" and values.min() >= 0 and values.max() <= 255:
            scaled = values
        elif values.min() >= 0 and values.max() <= 65535:
            scaled = (values.astype(np.uint32) * 255 + 32767) // 65535
        else:
            raise ValueError("32-bit pixels outside 0–65535: convert it to an 8- or 16-bit image")
        return Image.fromarray(np.asarray(scaled, dtype=np.uint8)).convert("RGB")
    return im.convert("RGB")


def read_image(path: Path) -> tuple[Any, str]:
    """(the 8-bit RGB image of ``path``, "") or (None, why it was skipped)."""
    from PIL import Image, UnidentifiedImageError

    limit = Image.MAX_IMAGE_PIXELS
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return None, f"unreadable: {e.strerror or e}"
    if not stat.S_ISREG(mode):  # looked at before it is opened: a FIFO would block, a device never end
        return None, f"{kind(mode)}, not a file"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(path) as im:
                w, h = im.size
                if limit is not None and w * h > limit:
                    return None, f"{w}×{h} px: {_megapixels(w * h)}, above the {_megapixels(limit)} limit"
                return _to_rgb(im), ""
    except UnidentifiedImageError:
        return None, "not an image"
    except Image.DecompressionBombError:
        return None, f"above twice the {_megapixels(limit or 0)} limit"
    except MemoryError:
        raise
    except Exception as e:  # a corrupt file makes Pillow's decoders raise many types: skip it, say why
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        return None, f"unreadable: {text}"


def folder_images(folder: Path, max_samples: int | None, skipped: Skipped) -> Iterator[tuple[str, Any]]:
    """(path relative to ``folder``, RGB image) for each readable image under ``folder`` (sorted, searched
    recursively; symlinked folders are not entered), up to ``max_samples``; files that are not, and broken
    symbolic links (dangling, or a loop), go to ``skipped``."""
    taken = 0
    if max_samples is not None and max_samples < 1:
        return
    for path in sorted(p for p in folder.rglob("*") if not p.is_dir()):
        name = str(path.relative_to(folder))
        image, why = read_image(path) if path.exists() else (None, "a broken symbolic link")
        if image is None:
            skipped.add(name, why)
            continue
        taken += 1
        yield name, image
        if max_samples is not None and taken >= max_samples:
            return


def padded_lengths(made: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """Tokens per sample where an image processor pads patches (Siglip2's ``pixel_attention_mask``, (B, n)
    ones then zeros): X's padding rows are excluded as a text model's are. None where nothing is padded."""
    mask = next((v for k, v in made.items() if k.endswith("attention_mask") and v.ndim == 2), None)
    if mask is None or bool(mask.all()):
        return None
    lengths = mask.sum(dim=1)
    prefix = torch.arange(mask.shape[1])[None, :] < lengths[:, None]
    if not torch.equal(mask.bool(), prefix):
        raise InputError(
            "the image processor's attention mask marks padding that is not at the end of each sample",
            "condcli excludes padding from X only at the end; open an issue naming the model",
        )
    return lengths
