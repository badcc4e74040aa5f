"""Inputs of an audio model: synthetic clips through the model's own feature extractor, in the form the model
reads (its :class:`Audio`):

- ``log-mel`` (Whisper): ``input_features`` (B, mel bins, frames), the encoder's whole input window;
- ``spectrogram`` (AST): ``input_values`` (B, frames, mel bins), the extractor's fixed ``max_length``;
- ``waveform`` (Wav2Vec2, HuBERT, WavLM, …): ``input_values`` (B, samples), normalised raw audio, or
  (B, channels, samples) (Encodec, Mimi);
- ``filterbank`` (Speech2Text; Parakeet's time-major log-mel): ``input_features`` (B, frames, bins) of a clip
  of any length (here 1 s).

Audio files are not read yet. Each clip is deterministic (seed, index): 1/f ("pink") noise with a few tones
on top. A model with no feature extractor at all (neither in its folder nor the family's defaults) gets the
clip itself where it reads a waveform (a raw waveform needs no extractor), else synthetic features: seeded
standard-normal values of the shape the encoder reads; the description says which. Every tensor the
extractor makes is returned (an ``attention_mask`` too); the caller keeps those the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

AudioKind = Literal["log-mel", "spectrogram", "waveform", "filterbank"]
WAVEFORM_SECONDS = 1.0  # a waveform or filterbank model reads clips of any length: this long
FBANK_WINDOW, FBANK_SHIFT = 0.025, 0.010  # Kaldi fbank (AST): 25 ms frames every 10 ms


@dataclass(frozen=True)
class Audio:
    """What an audio model reads: the kind, the key, one sample's shape and the clip it comes from."""

    kind: AudioKind
    shape: tuple[int, ...]  # one sample: (mel, frames) log-mel · (frames, mel) spectrogram, filterbank ·
    # (samples,) waveform
    rate: int  # sampling rate (Hz)
    samples: int  # audio samples per clip
    name: str = ""  # the model's name for it where not the extractor's (Gemma 3n's audio_mel)

    @property
    def made(self) -> str:
        """The extractor's name for it."""
        return "input_features" if self.kind in ("log-mel", "filterbank") else "input_values"

    @property
    def key(self) -> str:
        """The model's name for it."""
        return self.name or self.made


def audio_for(kind: AudioKind, extractor: Any, shape: tuple[int, ...], rate: int, name: str = "") -> Audio:
    """The clip length that gives ``shape``: frames × hop (log-mel), a Kaldi fbank's window and shift
    (spectrogram), the samples themselves (waveform), or 1 s (filterbank: its frames follow from it)."""
    if kind == "log-mel":
        samples = shape[1] * hop_length(extractor)
    elif kind == "spectrogram":
        samples = round((shape[0] - 1) * FBANK_SHIFT * rate + FBANK_WINDOW * rate)
    elif kind == "filterbank":
        samples = round(WAVEFORM_SECONDS * rate)
    else:
        samples = shape[-1]  # (samples,) or (channels, samples)
    return Audio(kind, shape, rate, samples, name)


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


def synthetic_inputs(
    extractor: Any, audio: Audio, seed: int, start: int, count: int
) -> dict[str, torch.Tensor]:
    """Every tensor ``extractor`` makes for synthetic clips start … start + count − 1 (the model's input
    under ``audio.key``, of shape (count, *audio.shape)); with no extractor, the clips themselves (a
    waveform: each channel the same clip) or seeded standard-normal features of that shape."""
    clips = [synthetic_audio(i, seed, audio.samples, audio.rate) for i in range(start, start + count)]
    if extractor is None and audio.kind == "waveform":
        waves = torch.from_numpy(np.stack(clips))
        return {audio.key: waves if len(audio.shape) == 1 else waves[:, None].repeat(1, audio.shape[0], 1)}
    if extractor is None:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + start)
        return {audio.key: torch.randn((count, *audio.shape), generator=gen)}
    kwargs: dict[str, Any] = {"sampling_rate": audio.rate, "return_tensors": "pt"}
    if audio.kind == "log-mel":
        kwargs.update(padding="max_length", max_length=audio.samples, truncation=True)
    out = dict(extractor(clips, **kwargs))
    if audio.made in out and audio.key != audio.made:
        out[audio.key] = out.pop(audio.made)
    if audio.kind == "log-mel":
        out[audio.key] = out[audio.key][..., : audio.shape[1]]
    return out


def hop_length(extractor: Any) -> int:
    """Audio samples per log-mel frame."""
    return int(getattr(extractor, "hop_length", 160))


def describe(extractor: Any, audio: Audio, count: int, seed: int) -> str:
    """What the synthetic inputs are, for the report."""
    dims = " × ".join(str(n) for n in audio.shape)
    seconds = audio.samples / audio.rate
    if extractor is None and audio.kind != "waveform":
        return (
            f"{count} synthetic {audio.kind} feature maps ({dims}, standard normal, seed {seed};"
            f" the model has no feature extractor) as {audio.key}"
        )
    if extractor is None:
        return (
            f"{count} synthetic audio clips (1/f noise + tones, seed {seed}; {seconds:.3g} s at"
            f" {audio.rate} Hz) → raw waveform {dims} as {audio.key} (the model has no feature extractor)"
        )
    into = {
        "log-mel": "log-mel",
        "spectrogram": "spectrogram (frames × mel bins)",
        "waveform": "waveform",
        "filterbank": "filterbank (frames × bins)",
    }
    return (
        f"{count} synthetic audio clips (1/f noise + tones, seed {seed}; {seconds:.3g} s at {audio.rate} Hz)"
        f" → {into[audio.kind]} {dims} as {audio.key}"
    )
