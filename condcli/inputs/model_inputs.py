"""Which inputs a Hugging Face model gets, from what it reads: its ``main_input_name`` and its forward's
parameters.

- ``pixel_values``: images through its image processor, or, where it reads clips (its config has
  ``num_frames``, and a 3-D convolution or a video processor in its family), video (B, T, C, H, W) through
  its video processor; ``pixel_values_videos``: video so (V-JEPA 2, VideoPrism);
- ``input_values``: audio, as a spectrogram where its config has ``num_mel_bins`` (AST), else a waveform;
- ``input_features``: audio as log-mel features (Whisper's (mel bins, frames), or (frames, mel bins) where
  its extractor makes those), or filterbank frames (Speech2Text's (frames, bins)) where the config (and its
  audio or encoder sub-config) names no mel bins; another main input of a model whose modality is audio
  (Gemma 3n's ``audio_mel``): its extractor's features so named;
- ``input_ids``: text through its tokenizer.

Every tensor the processor makes that the forward names is fed. A model that reads another main input, or
whose forward requires an argument the inputs do not carry, is refused with one line: it is never analysed
on inputs it did not ask for.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from torch import nn

from condcli.adapters.generic.vision import clip_frames
from condcli.errors import InputError
from condcli.inputs.audio import AudioKind
from condcli.inputs.batches import Preprocessing
from condcli.inputs.preprocessing import hf_image_preprocessing, hf_text_preprocessing
from condcli.inputs.preprocessing_av import audio_preprocessing, mel_bins, video_preprocessing

# the main inputs condcli makes
MADE = ("pixel_values", "pixel_values_videos", "input_values", "input_features", "input_ids")
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def forward_reads(module: nn.Module) -> tuple[frozenset[str], frozenset[str]]:
    """(the parameters ``module.forward`` names, those of them it requires: no default)."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):  # a forward with no readable signature: nothing is known
        return frozenset(), frozenset()
    named = [p for p in params if p.kind in (*POSITIONAL, inspect.Parameter.KEYWORD_ONLY)]
    required = [p.name for p in named if p.default is inspect.Parameter.empty]
    return frozenset(p.name for p in named), frozenset(required)


def hf_preprocessing(
    source: str | Path | None, analysed: nn.Module, input_kind: str, trust: bool = False
) -> Preprocessing:
    """The HF model's own preprocessing for what it reads (module docstring); one InputError where condcli
    cannot make its inputs."""
    config: Any = getattr(analysed, "config", None)
    main = str(getattr(analysed, "main_input_name", "") or "")
    reads, required = forward_reads(analysed)
    keep = reads or None
    name = type(analysed).__name__
    if main in ("", "input_ids") and reads and "input_ids" not in reads and "pixel_values" in required:
        main = "pixel_values"  # a vision tower keeping the default main input (MGP-STR)
    # an audio model's main input named for a mel spectrogram (Gemma 3n's audio_mel), not latents, embeddings
    mel = main not in MADE and "mel" in main.split("_") and "audio" in _modalities(analysed)
    if main == "input_features" or mel:  # Whisper's (mel, frames) where the config names its mel bins
        features: AudioKind = "log-mel" if mel_bins(config) is not None else "filterbank"
        pre = audio_preprocessing(source, config, trust, features, keep, main)
    elif main == "input_values":
        # a spectrogram model (AST) names its mel bins and its frame count (max_length); SpeechT5 names mel
        # bins for the speech it speaks, and its encoder reads a waveform
        mel = mel_bins(config) is not None
        frames = isinstance(getattr(config, "max_length", None), int)
        kind: AudioKind = "spectrogram" if mel and frames else "waveform"
        pre = audio_preprocessing(source, config, trust, kind, keep)
    elif main == "pixel_values_videos" or (main == "pixel_values" and clip_frames(analysed) is not None):
        pre = video_preprocessing(source, config, trust, keep, main)
    elif main == "pixel_values" and isinstance(getattr(config, "num_frames", None), int):
        raise InputError(
            f"[inputs] {name} has a frame count (num_frames {config.num_frames}) but embeds frames one by"
            " one: it may read clips flattened into the batch (X-CLIP's vision encoder), and condcli cannot"
            " tell which rows belong to which clip",
            "analyse the whole model it belongs to, or describe it in a TOML file passed as `adapter`",
        )
    elif main == "pixel_values" or (input_kind == "images" and main in ("", "input_ids")):
        # (a declared adapter reading images from a class that keeps transformers' default main input)
        pre = hf_image_preprocessing(source, config, trust, keep)
    elif main in ("", "input_ids"):
        pre = hf_text_preprocessing(source, config, trust)
    else:
        raise InputError(
            f"[inputs] {name} reads {main}, an input condcli cannot make (it makes images, video clips, audio"
            f" and text: {', '.join(MADE)})",
            "analyse a model that reads one of those, or open an issue naming the model",
        )
    missing = sorted(required - set(pre.feeds)) if pre.feeds else []
    if missing:
        masks = [m for m in missing if m.endswith("mask")]
        raise InputError(
            f"[inputs] {name}.forward requires {', '.join(missing)}, which the inputs condcli makes"
            f" for it do not carry (they carry {', '.join(pre.feeds)}; {pre.describe})"
            + (
                f"; condcli does not make up {', '.join(masks)}: which of its values marks padding is the"
                " model's own convention"
                if masks
                else ""
            ),
            "put the model's own preprocessor config (the processor that makes those) beside its weights",
        )
    return pre


def _modalities(module: nn.Module) -> tuple[str, ...]:
    """What a transformers model says it reads (``input_modalities``: "audio", ("image", "text"), …)."""
    said = getattr(module, "input_modalities", ())
    return (said,) if isinstance(said, str) else tuple(s for s in said if isinstance(s, str))
