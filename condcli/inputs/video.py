"""Inputs of a video model: synthetic clips through the model's own video processor, ``pixel_values`` (or
``pixel_values_videos``) of shape (B, T, C, H, W) with T the frame count of the model's config.

Video files are not read yet. Each clip is deterministic (seed, index): one wide 1/f image (natural-image
statistics, :func:`condcli.inputs.batches.synthetic_image`) that the camera pans across, a few pixels a
frame, so
that frames differ as a video's do and still share most of their content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from condcli.inputs.batches import synthetic_image


@dataclass(frozen=True)
class Video:
    """What a video model reads: (frames, channels, height, width) of one clip's ``pixel_values``."""

    frames: int
    channels: int
    size: tuple[int, int]  # (height, width) the model is built for

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.frames, self.channels, *self.size


def synthetic_clip(index: int, seed: int, frames: int, size: tuple[int, int]) -> np.ndarray:
    """(frames, H, W, 3) uint8: a pan across one 1/f image, ``max(1, W // 16)`` pixels a frame."""
    h, w = size
    step = max(1, w // 16)
    wide = synthetic_image(index, seed, (h, w + step * (frames - 1)))
    return np.stack([wide[:, t * step : t * step + w] for t in range(frames)])


def synthetic_inputs(
    processor: Any, video: Video, seed: int, start: int, count: int
) -> dict[str, torch.Tensor]:
    """Every tensor ``processor`` makes for synthetic clips start … start + count − 1, a little larger than
    the model's input (its own resize and crop apply)."""
    h, w = video.size
    larger = (max(h, 32) * 8 // 7, max(w, 32) * 8 // 7)
    clips = [list(synthetic_clip(i, seed, video.frames, larger)) for i in range(start, start + count)]
    return dict(processor(clips, return_tensors="pt"))


def describe(video: Video, count: int, seed: int, key: str = "pixel_values") -> str:
    """What the synthetic inputs are, for the report."""
    h, w = video.size
    return (
        f"{count} synthetic video clips ({video.frames} frames panning across a 1/f image, seed {seed};"
        f" video files are not read) → {key} {video.frames} × {video.channels} × {h} × {w}"
    )
