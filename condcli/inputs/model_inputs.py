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
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.modules.conv import _ConvNd

from condcli.adapters.generic.vision import clip_frames
from condcli.adapters.nested_config import setting
from condcli.errors import InputError
from condcli.inputs.audio import AudioKind
from condcli.inputs.batches import Preprocessing
from condcli.inputs.preprocessing import hf_image_preprocessing, hf_text_preprocessing
from condcli.inputs.preprocessing_av import audio_preprocessing, mel_bins, video_preprocessing

# the main inputs condcli makes
MADE = ("pixel_values", "pixel_values_videos", "input_values", "input_features", "input_ids")
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
# the patch grid, (h, w) in patches per image, of a vision tower that packs a forward's images (MiniCPM)
GRID = "target_sizes"


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
        if kind == "waveform" and not any(isinstance(m, _ConvNd) for m in analysed.modules()):
            raise _embedded_frames(name, config)
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
        if GRID in reads:
            pre = _patch_grid(pre, config, name)
    elif main in ("", "input_ids"):
        pre = hf_text_preprocessing(source, config, trust)
        pre = _second_encoder(pre, config, reads)
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


def _second_encoder(pre: Preprocessing, config: Any, reads: frozenset[str]) -> Preprocessing:
    """A text model whose forward also reads the token ids of a second encoder that its config describes
    with a vocabulary of its own (Evolla: ``protein_input_ids`` and ``protein_attention_mask`` for the encoder
    of ``protein_encoder_config``), which runs only when given them: seeded random ids in that vocabulary, as
    many per sample as the text has tokens and padded as the text is (its attention mask), made beside each
    batch. The first such encoder only; none: ``pre`` as it is."""
    for read in sorted(reads):
        part = read.removesuffix("_input_ids")
        if part in ("", read, "decoder") or f"{part}_attention_mask" not in reads:
            continue
        sub = getattr(config, f"{part}_encoder_config", None)
        vocab = getattr(sub, "vocab_size", None)
        if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 2:
            continue
        pad = getattr(sub, "pad_token_id", None)
        pad = pad if isinstance(pad, int) and not isinstance(pad, bool) and 0 <= pad < vocab else 0
        ids, mask = read, f"{part}_attention_mask"
        return replace(
            pre,
            beside=partial(_random_ids, ids=ids, mask=mask, vocab=vocab, pad=pad),
            feeds=(*pre.feeds, ids, mask),
            describe=f"{pre.describe}; {ids}: seeded random token ids in the {vocab}-token vocabulary of its"
            f" {part} encoder ({part}_encoder_config), as many as the text's tokens (condcli has no {part}"
            " inputs to read)",
        )
    return pre


def _random_ids(
    inputs: dict[str, torch.Tensor], seed: int, start: int, *, ids: str, mask: str, vocab: int, pad: int
) -> dict[str, torch.Tensor]:
    """``ids``: seeded random token ids below ``vocab``, shaped and padded (with ``pad``) as the batch's text
    is; ``mask``: the text's attention mask. Sample i's ids depend on the seed and i alone, not its batch."""
    text = inputs["attention_mask"]
    rows = [
        np.random.default_rng([seed, start + i]).integers(0, vocab, text.shape[1]) for i in range(len(text))
    ]
    made = torch.from_numpy(np.stack(rows)).long().masked_fill(text == 0, pad)
    return {ids: made, mask: text.clone()}


def _embedded_frames(name: str, config: Any) -> InputError:
    """The refusal of a module that names input_values but holds no convolution to frame a waveform with
    (SpeechT5's encoder without its speech prenet: its first step is a LayerNorm over the model's width): it
    reads frames already embedded, which a front end outside it makes (issue 42)."""
    width = setting(config, "hidden_size")
    shape = f"(batch, frames, {width})" if isinstance(width, int) else "(batch, frames, width)"
    kind = str(getattr(config, "model_type", "") or "")
    try:
        from transformers.models.auto import modeling_auto as auto

        tasks = (
            auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
            auto.MODEL_FOR_CTC_MAPPING_NAMES,
            auto.MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES,
        )
        speech = [str(t[kind]) for t in tasks if kind in t]
    except (ImportError, AttributeError):
        speech = []
    where = f" (transformers' speech classes of {kind}: {', '.join(speech)})" if speech else ""
    return InputError(
        f"[inputs] {name} reads input_values as frames already embedded, {shape}, not as a waveform: it holds"
        " no convolution to turn audio into frames, so its input is what a feature encoder or prenet makes,"
        " and condcli makes no such frames",
        f"analyse a model whose encoder carries its speech front end{where}",
    )


def _patch_grid(pre: Preprocessing, config: Any, name: str) -> Preprocessing:
    """A vision tower that packs the images of a forward into one sequence, split by their patch grids
    (NaViT: MiniCPM's ``target_sizes``, (h, w) in patches per image, with which it places its positions and
    splits its attention): one image per forward, so that a row of X is one image; the grid, where its image
    processor does not make it, made from each image's size over the config's ``patch_size`` (what its patch
    embedding, a convolution of that stride, makes of it)."""
    told = "one image per forward (it packs a forward's images into one sequence)"
    if GRID in pre.feeds:
        return replace(pre, per_forward=1, describe=f"{pre.describe}; {told}")
    patch = setting(config, "patch_size", ("vision_config",))
    if isinstance(patch, int) and not isinstance(patch, bool):
        patch = (patch, patch)
    if not (
        isinstance(patch, tuple | list)
        and len(patch) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in patch)
    ):
        raise InputError(
            f"[inputs] {name} reads {GRID}, the patch grid (h, w) of each image it packs into one sequence,"
            f" which its image processor does not make, and its config gives no patch_size ({patch!r}) to"
            " make it from",
            "put the model's own preprocessor config (the processor that makes target_sizes) beside its"
            " weights",
        )
    ph, pw = int(patch[0]), int(patch[1])
    made = pre.image_batch

    def batch(images: list[Any]) -> dict[str, torch.Tensor]:
        if made is not None:
            out = dict(made(images))
        else:
            assert pre.image_transform is not None
            out = {"pixel_values": torch.stack([pre.image_transform(i) for i in images])}
        h, w = out["pixel_values"].shape[-2:]
        out[GRID] = torch.tensor([[h // ph, w // pw]] * len(images), dtype=torch.int32)
        return out

    h, w = pre.image_size
    return replace(
        pre,
        image_batch=batch,
        feeds=(*(pre.feeds or ("pixel_values",)), GRID),
        per_forward=1,
        describe=f"{pre.describe}; {GRID} made by condcli: each image's patch grid, its height and width over"
        f" patch_size {ph}×{pw} ({h // ph}×{w // pw} at {h}×{w}); {told}",
    )


def _modalities(module: nn.Module) -> tuple[str, ...]:
    """What a transformers model says it reads (``input_modalities``: "audio", ("image", "text"), …)."""
    said = getattr(module, "input_modalities", ())
    return (said,) if isinstance(said, str) else tuple(s for s in said if isinstance(s, str))
