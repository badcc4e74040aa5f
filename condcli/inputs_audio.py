"""Inputs of an audio encoder (Whisper): synthetic clips through the model's own log-mel feature extractor
(batched into an input stream by :mod:`condcli.inputs`).

Audio files are not read yet. Each clip is deterministic (seed, index): 1/f ("pink") noise with a few
tones on top, as long as the encoder's input window. A model with no feature extractor at all (neither in
its folder nor, as for Whisper, the family's defaults) gets synthetic features: seeded standard-normal
values of the shape the encoder reads. The description says which.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def synthetic_audio(index: int, seed: int, samples: int, rate: int) -> np.ndarray:
    """A deterministic float32 clip in [-0.5, 0.5]: 1/f noise (power ∝ 1/f) plus two or three tones."""
    rng = np.random.default_rng([seed, index, 7])
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    f = np.fft.rfftfreq(samples, d=1.0 / rate)
    f[0] = f[1] if samples > 1 else 1.0
    noise = np.fft.irfft(spectrum / np.sqrt(f), n=samples)
    t = np.arange(samples) / rate
    tones = sum(
        rng.uniform(0.3, 1.0)
        * np.sin(2 * np.pi * rng.uniform(80.0, rate / 4) * t + rng.uniform(0, 2 * np.pi))
        for _ in range(int(rng.integers(2, 4)))
    )
    clip = noise / (np.abs(noise).max() + 1e-12) + 0.5 * np.asarray(tones)
    return np.asarray(0.5 * clip / (np.abs(clip).max() + 1e-12), dtype=np.float32)


def synthetic_features(
    extractor: Any, shape: tuple[int, int], rate: int, seed: int, start: int, count: int
) -> torch.Tensor:
    """(count, mel bins, frames) log-mel features of synthetic clips start … start + count − 1 through
    ``extractor``; with no extractor, seeded standard-normal values of that shape."""
    mel, frames = shape
    if extractor is None:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + start)
        return torch.randn((count, mel, frames), generator=gen)
    samples = frames * hop_length(extractor)
    clips = [synthetic_audio(i, seed, samples, rate) for i in range(start, start + count)]
    out = extractor(
        clips,
        sampling_rate=rate,
        return_tensors="pt",
        padding="max_length",
        max_length=samples,
        truncation=True,
    )
    features: torch.Tensor = out["input_features"]
    return features[..., :frames]


def hop_length(extractor: Any) -> int:
    """Audio samples per log-mel frame."""
    return int(getattr(extractor, "hop_length", 160))


def describe(extractor: Any, shape: tuple[int, int], rate: int, count: int, seed: int) -> str:
    """What the synthetic inputs are, for the report."""
    mel, frames = shape
    if extractor is None:
        return (
            f"{count} synthetic log-mel feature maps ({mel} bins × {frames} frames, standard normal,"
            f" seed {seed}; the model has no feature extractor)"
        )
    seconds = frames * hop_length(extractor) / rate
    return (
        f"{count} synthetic audio clips (1/f noise + tones, seed {seed}; {seconds:.3g} s at {rate} Hz)"
        f" → log-mel {mel} × {frames}"
    )
