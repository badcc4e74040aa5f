"""Inputs of an audio encoder (Whisper): synthetic clips through the model's own log-mel feature extractor.

Audio files are not read yet. Each clip is deterministic (seed, index): 1/f ("pink") noise with a few
tones on top, as long as the encoder's input window. With no feature extractor in the model's folder the
features themselves are synthetic (seeded standard-normal values of the shape the encoder reads), and the
description says so.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from condcli.errors import UsageError
from condcli.inputs import DEFAULT_SYNTHETIC_SAMPLES, Batch, InputSpec, InputStream, Preprocessing


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


def _features(pre: Preprocessing, spec: InputSpec, start: int, count: int) -> torch.Tensor:
    """(count, mel bins, frames) log-mel features of synthetic clips start … start + count − 1."""
    mel, frames = pre.audio_shape
    fe = pre.feature_extractor
    if fe is None:
        gen = torch.Generator().manual_seed(spec.seed * 1_000_003 + start)
        return torch.randn((count, mel, frames), generator=gen)
    hop = int(getattr(fe, "hop_length", 160))
    samples = frames * hop
    clips = [synthetic_audio(i, spec.seed, samples, pre.sampling_rate) for i in range(start, start + count)]
    out = fe(
        clips,
        sampling_rate=pre.sampling_rate,
        return_tensors="pt",
        padding="max_length",
        max_length=samples,
        truncation=True,
    )
    features: torch.Tensor = out["input_features"]
    return features[..., :frames]


def _batches(pre: Preprocessing, spec: InputSpec, count: int) -> Iterator[Batch]:
    for start in range(0, count, spec.batch_size):
        size = min(spec.batch_size, count - start)
        names = [f"synthetic audio #{i}" for i in range(start, start + size)]
        yield Batch({"input_features": _features(pre, spec, start, size)}, None, names)


def audio_stream(pre: Preprocessing, spec: InputSpec) -> InputStream:
    """Synthetic inputs of an audio encoder, labelled as such (audio files are not read yet)."""
    if spec.images is not None or spec.text is not None:
        given = "`images`" if spec.images is not None else "`text`"
        raise UsageError(
            f"{given} was given for an audio model",
            "this model reads audio; leave both out to analyse it on synthetic clips",
        )
    n = spec.max_samples or DEFAULT_SYNTHETIC_SAMPLES
    mel, frames = pre.audio_shape
    if pre.feature_extractor is None:
        what = (
            f"{n} synthetic log-mel feature maps ({mel} bins × {frames} frames, standard normal,"
            f" seed {spec.seed}; the model has no feature extractor)"
        )
    else:
        hop = int(getattr(pre.feature_extractor, "hop_length", 160))
        seconds = frames * hop / pre.sampling_rate
        what = (
            f"{n} synthetic audio clips (1/f noise + tones, seed {spec.seed}; {seconds:.3g} s at "
            f"{pre.sampling_rate} Hz) → log-mel {mel} × {frames}"
        )
    return InputStream("synthetic", what, lambda s: _batches(pre, spec, n), expected=n)
