"""``shapes10``: a procedurally generated 10-class image set (32×32 RGB) that needs no download.

Every image is one shape (or texture) at a random position and size, in a random colour on a random
background colour, with a faint random gradient and pixel noise on top. The classes differ in form only,
so colour and position carry no label information. The same ``seed`` always gives the same images.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

SIZE = 32
CLASSES = (
    "disc",
    "ring",
    "square",
    "frame",
    "triangle",
    "plus",
    "cross",
    "horizontal stripes",
    "vertical stripes",
    "checkerboard",
)
# Normalisation stored in the sample's pretrained_cfg (so condcli's own preprocessing matches training).
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)


def _mask(
    label: int,
    yy: np.ndarray,
    xx: np.ndarray,
    cy: float,
    cx: float,
    r: float,
    period: float,
    rng: np.random.Generator,
) -> Any:
    """Boolean (SIZE, SIZE) foreground of one image of class ``label``."""
    dy, dx = yy - cy, xx - cx
    dist = np.hypot(dy, dx)
    thick = max(1.2, 0.3 * r)
    inside_box = (np.abs(dy) <= r) & (np.abs(dx) <= r)
    if label == 0:  # disc
        return dist <= r
    if label == 1:  # ring
        return (dist <= r) & (dist >= r - thick)
    if label == 2:  # square
        return inside_box
    if label == 3:  # frame (hollow square)
        return inside_box & ((np.abs(dy) >= r - thick) | (np.abs(dx) >= r - thick))
    if label == 4:  # triangle, apex up or down
        up = rng.random() < 0.5
        t = (dy + r) / (2 * r) if up else (r - dy) / (2 * r)  # 0 at the apex, 1 at the base
        return (np.abs(dy) <= r) & (np.abs(dx) <= t * r)
    if label == 5:  # plus
        return inside_box & ((np.abs(dy) <= thick / 2) | (np.abs(dx) <= thick / 2))
    if label == 6:  # diagonal cross
        return inside_box & ((np.abs(dy - dx) <= thick / 1.4) | (np.abs(dy + dx) <= thick / 1.4))
    phase = rng.random() * period
    if label == 7:  # horizontal stripes
        return inside_box & (((yy + phase) // (period / 2)) % 2 == 0)
    if label == 8:  # vertical stripes
        return inside_box & (((xx + phase) // (period / 2)) % 2 == 0)
    # checkerboard
    return inside_box & ((((yy + phase) // (period / 2)) + ((xx + phase) // (period / 2))) % 2 == 0)


def make_shapes(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` images (count, 32, 32, 3) uint8 and their labels (count,) int64, balanced over classes."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count, dtype=np.int64) % len(CLASSES)
    rng.shuffle(labels)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    images = np.empty((count, SIZE, SIZE, 3), dtype=np.uint8)
    for i, label in enumerate(labels):
        r = rng.uniform(5.0, 12.0)
        cy, cx = rng.uniform(r, SIZE - 1 - r, size=2)
        period = rng.uniform(4.0, 7.0)
        fg, bg = rng.random(3), rng.random(3)
        while np.abs(fg - bg).sum() < 0.6:  # keep the shape visible
            bg = rng.random(3)
        gy, gx = rng.normal(0.0, 0.1, size=2) / SIZE
        shade = gy * (yy - SIZE / 2) + gx * (xx - SIZE / 2)
        mask = _mask(int(label), yy, xx, cy, cx, r, period, rng)
        img = np.where(mask[..., None], fg, bg) + shade[..., None] + rng.normal(0.0, 0.08, (SIZE, SIZE, 3))
        images[i] = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    return images, labels


def normalise(images: np.ndarray) -> np.ndarray:
    """uint8 (n, 32, 32, 3) → float32 (n, 3, 32, 32), as the sample's timm preprocessing does."""
    x = images.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    mean = np.asarray(MEAN, dtype=np.float32)[:, None, None]
    std = np.asarray(STD, dtype=np.float32)[:, None, None]
    return np.asarray((x - mean) / std, dtype=np.float32)


def digest(images: np.ndarray, labels: np.ndarray) -> str:
    """sha256 of a data split, recorded in the metadata so a changed generator is caught."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels).tobytes())
    return h.hexdigest()
