"""The model's own audio feature extractor or video processor, and the synthetic clips fed through it.

The processor is the model's own (its folder's preprocessor_config.json or video_preprocessor_config.json,
or its hub id's), else the family's class in transformers' auto mappings built for the shapes in the
model's config; the description says which. What the processor makes is checked against what the model
reads (the frame count, mel bins and image size of its config) on one clip before any number: a model fed
other inputs than it asks for is refused, never analysed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from condcli.adapters.nested_config import setting
from condcli.errors import InputError
from condcli.inputs.audio import FBANK_SHIFT, WAVEFORM_SECONDS, AudioKind, audio_for
from condcli.inputs.audio import describe as describe_audio
from condcli.inputs.audio import synthetic_inputs as audio_inputs
from condcli.inputs.batches import Preprocessing, Synthetic
from condcli.inputs.preprocessing import (
    PREPROCESSOR,
    _first_line,
    _load_local,
    fed,
    image_size,
    keep_read,
)
from condcli.inputs.video import Video
from condcli.inputs.video import describe as describe_video
from condcli.inputs.video import synthetic_inputs as video_inputs
from condcli.reports.refusal import Refused

VIDEO_PREPROCESSOR = "video_preprocessor_config.json"
NO_CONFIG = "(the model has no preprocessor config)"
AUDIO_CONFIGS = ("audio_config", "encoder_config")  # where a composite model's audio settings sit
# features per frame of a time-major encoder: W2V-BERT's (the extractor stacks frames), Gemma 3n's audio
FRAME_FEATURES = ("feature_projection_input_dim", "input_feat_size")


def _own(source: str | Path | None, auto: Any, what: str, files: tuple[str, ...], trust: bool) -> Any:
    """The processor of a model folder (the first of ``files`` it holds) or hub id; None where it has none."""
    if source is None:
        return None
    folder = Path(source)
    if folder.is_dir():
        file = next((f for f in files if (folder / f).is_file()), None)
        if file is None:
            return None
        load = lambda: auto.from_pretrained(str(source), trust_remote_code=trust)  # noqa: E731
        return _load_local(load, folder, what, "the family's defaults", file)
    try:
        return auto.from_pretrained(str(source), trust_remote_code=trust)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a hub id without one, or the hub out of reach


def _family_class(config: Any, names: dict[str, Any], fallback: str | None = None) -> Any:
    """The class transformers' auto mapping names for the config's model type, else the one it names for
    the other model types of the same transformers module where they agree (a part's config, Mimi's encoder
    ``mimi_encoder``, is of its family ``mimi``); None: none."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name

    def one(value: Any) -> Any:
        if isinstance(value, dict):  # image/video processors: one class per backend
            return value.get("torchvision") or next(iter(value.values()), None)
        return value

    model_type = str(getattr(config, "model_type", ""))
    name = one(names.get(model_type))
    if name is None and model_type in CONFIG_MAPPING_NAMES:
        module = model_type_to_module_name(model_type)
        kin = {
            one(v)
            for t, v in names.items()
            if t in CONFIG_MAPPING_NAMES and model_type_to_module_name(t) == module
        }
        name = kin.pop() if len(kin) == 1 else None
    name = name or fallback
    return getattr(transformers, name, None) if isinstance(name, str) else None


def _positive(
    config: Any, name: str, default: int | None = None, prefer: tuple[str, ...] = AUDIO_CONFIGS
) -> int:
    """``config.name`` (or a sub-config's, those named in ``prefer`` first): a positive integer."""
    value = setting(config, name, prefer, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(
            f"the model's config gives {name} as {value!r}, not a positive integer",
            f"fix {name} in its config.json",
        )
    return value


def _audio_shape(kind: AudioKind, config: Any, rate: int) -> tuple[int, ...]:
    """One sample's input shape, from the config: (mel, frames) Whisper's two convolutions halve the
    frames to ``max_source_positions``; (frames, mel) AST's ``max_length``; (samples,) a waveform."""
    if kind == "log-mel":
        return _positive(config, "num_mel_bins", 80), 2 * _positive(config, "max_source_positions", 1500)
    if kind == "spectrogram":
        return _positive(config, "max_length"), _positive(config, "num_mel_bins")
    if kind == "filterbank":  # frames: those of a 1 s clip, known once the extractor has made them
        return 0, _filterbank_bins(config)
    return (round(WAVEFORM_SECONDS * rate),)


def mel_bins(config: Any) -> Any:
    """The mel bins the config (or its audio/encoder sub-config) names; None where it names none."""
    return setting(config, "num_mel_bins", AUDIO_CONFIGS)


def _filterbank_bins(config: Any) -> int:
    """Features per frame of a filterbank encoder: Speech2Text's input_feat_per_channel × input_channels,
    the mel bins of a time-major encoder (Parakeet), or the stacked frames' features (W2V-BERT's
    feature_projection_input_dim)."""
    if setting(config, "input_feat_per_channel", AUDIO_CONFIGS) is not None:
        return _positive(config, "input_feat_per_channel") * _positive(config, "input_channels", 1)
    for name in ("num_mel_bins", *FRAME_FEATURES):
        if setting(config, name, AUDIO_CONFIGS) is not None:
            return _positive(config, name)
    raise InputError(
        f"[inputs] this {getattr(config, 'model_type', '?')} model reads input_features of a layout condcli"
        " does not know (its config names none of num_mel_bins, input_feat_per_channel,"
        f" {', '.join(FRAME_FEATURES)}, nor do its sub-configs)",
        "put the model's own preprocessor_config.json beside its weights",
    )


def _default_extractor(kind: AudioKind, config: Any) -> Any:
    """The family's feature extractor (transformers' auto mapping) built for the model's config."""
    from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES

    cls = _family_class(config, FEATURE_EXTRACTOR_MAPPING_NAMES)
    if cls is None:
        return None
    key = "input_values" if kind in ("spectrogram", "waveform") else "input_features"
    try:  # (a dummy class raises ImportError on any attribute)
        makes = getattr(cls, "model_input_names", None)
        if isinstance(makes, list) and key not in makes:
            return None  # one that makes another input (W2V-BERT's maps Wav2Vec2's waveform extractor)
        return _built(cls, kind, config)
    except ImportError as e:  # transformers' dummy class of an extractor whose backend is missing
        said = " ".join(str(e).split()).split(". ")[0]
        raise Refused(
            "inputs",
            f"the {getattr(config, 'model_type', '?')} model's feature extractor cannot be built here:"
            f" {said}",
            f"install the library it names, or put the model's own {PREPROCESSOR} beside its weights",
        ) from None


def _built(cls: Any, kind: AudioKind, config: Any) -> Any:
    if kind == "log-mel":
        return cls(feature_size=_positive(config, "num_mel_bins", 80))
    if kind == "spectrogram":
        return cls(num_mel_bins=_positive(config, "num_mel_bins"), max_length=_positive(config, "max_length"))
    if kind == "filterbank":
        bins = _filterbank_bins(config)
        return cls(feature_size=bins, num_mel_bins=bins)
    return cls(return_attention_mask=getattr(config, "feat_extract_norm", "") == "layer")


def audio_preprocessing(
    source: str | Path | None,
    config: Any,
    trust: bool = False,
    kind: AudioKind = "log-mel",
    reads: frozenset[str] | None = None,
    name: str = "",
) -> Preprocessing:
    """The model's own feature extractor, else the family's defaults; with neither, the synthetic clip
    itself for a waveform model, synthetic features for the others (said so). ``name``: the model's name
    for the features where it is not the extractor's (Gemma 3n's audio_mel)."""
    from transformers import AutoFeatureExtractor

    extractor = _own(source, AutoFeatureExtractor, "feature extractor", (PREPROCESSOR,), trust)
    describe = f"{type(extractor).__name__} from {source}"
    if extractor is None:
        extractor = _default_extractor(kind, config)
        describe = f"{type(extractor).__name__} defaults {NO_CONFIG}"
    rate = getattr(extractor, "sampling_rate", 0) or setting(config, "sampling_rate", AUDIO_CONFIGS)
    rate = int(rate) if isinstance(rate, int | float) and rate > 0 else 16000
    shape = _audio_shape(kind, config, rate)
    if extractor is None:
        fed_as = "the raw synthetic waveform" if kind == "waveform" else f"synthetic {kind} features"
        describe = f"no feature extractor: {fed_as}"
        if kind == "waveform" and isinstance(setting(config, "audio_channels", AUDIO_CONFIGS), int):
            shape = (_positive(config, "audio_channels"), *shape)  # Encodec/Mimi-style (channels, samples)
        if kind == "filterbank":
            shape = (round(WAVEFORM_SECONDS / FBANK_SHIFT), shape[1])  # 1 s of 10 ms frames
    elif kind == "log-mel" and int(getattr(extractor, "feature_size", shape[0])) != shape[0]:
        describe = (
            f"no usable feature extractor ({type(extractor).__name__} gives "
            f"{extractor.feature_size} mel bins, the model reads {shape[0]}): synthetic log-mel features"
        )
        extractor = None
    audio = audio_for(kind, extractor, shape, rate, name)
    kept, dropped = keep_read(_probe(lambda: audio_inputs(extractor, audio, 0, 0, 1), describe), reads)
    if kind == "log-mel" and extractor is not None and _time_major(kept.get(audio.key), shape[0]):
        # the extractor makes (B, frames, mel), the layout Parakeet/FastConformer-style encoders read (their
        # subsampling takes mel as the last axis): a filterbank of frames × mel bins, taken as it makes it
        kind, shape = "filterbank", (0, shape[0])
        audio = audio_for(kind, extractor, shape, rate, name)
        kept, dropped = keep_read(_probe(lambda: audio_inputs(extractor, audio, 0, 0, 1), describe), reads)
    waveform = kept.get(audio.key) if kind == "waveform" else None
    if waveform is not None and waveform.ndim == 3 and tuple(waveform.shape[:2]) == (1, 1):
        shape = (1, int(waveform.shape[-1]))  # (channels, samples): Encodec/DAC-style, padded to the hop
    if kind == "filterbank" and audio.key in kept and kept[audio.key].ndim == 3:
        shape = (int(kept[audio.key].shape[1]), shape[1])  # the frames of a 1 s clip
        audio = audio_for(kind, extractor, shape, rate, name)
    _check(kept, audio.key, (1, *shape), describe, "mel bins and frames" if kind != "waveform" else "samples")
    dims = " × ".join(map(str, shape))
    what = {
        "log-mel": "mel bins × frames",
        "spectrogram": "frames × mel bins",
        "waveform": "samples" if len(shape) == 1 else "channels × samples",
        "filterbank": "frames × bins",
    }[kind]
    made = Synthetic(
        "audio",
        lambda seed, start, count: keep_read(audio_inputs(extractor, audio, seed, start, count), reads)[0],
        lambda count, seed: describe_audio(extractor, audio, count, seed),
    )
    text = f"{describe}, {dims} ({what}){fed(kept, dropped) if len(kept) > 1 or dropped else ''}"
    return Preprocessing("audio", text, synthetic=made, feeds=tuple(kept))


def _default_video_processor(config: Any, size: tuple[int, int]) -> Any:
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    cls = _family_class(config, VIDEO_PROCESSOR_MAPPING_NAMES, "VideoMAEVideoProcessor")
    h, w = size
    return cls(size={"shortest_edge": min(h, w)}, crop_size={"height": h, "width": w})


def _clip(config: Any) -> Video:
    """Frames, channels and size of the clips a video model reads, from its config: ``num_frames``,
    ``num_channels``, ``image_size`` (V-JEPA 2: ``frames_per_clip``, ``in_chans``, ``crop_size``)."""
    frames = next((n for n in ("num_frames", "frames_per_clip") if hasattr(config, n)), "num_frames")
    channels = next((n for n in ("num_channels", "in_chans") if hasattr(config, n)), "num_channels")
    size = "crop_size" if not hasattr(config, "image_size") and hasattr(config, "crop_size") else "image_size"
    return Video(_positive(config, frames), _positive(config, channels, 3), image_size(config, name=size))


def video_preprocessing(
    source: str | Path | None,
    config: Any,
    trust: bool = False,
    reads: frozenset[str] | None = None,
    key: str = "pixel_values",
) -> Preprocessing:
    """The model's own video processor, else the family's defaults, on synthetic clips of the config's
    frame count; what it makes must be (1, T, C, H, W) of the config's shapes, fed as ``key`` (the model's
    name for it: ``pixel_values`` or ``pixel_values_videos``, whichever the processor calls it)."""
    from transformers import AutoVideoProcessor

    video = _clip(config)
    files = (VIDEO_PREPROCESSOR, PREPROCESSOR)
    processor = _own(source, AutoVideoProcessor, "video processor", files, trust)
    describe = f"{type(processor).__name__} from {source}"
    if processor is None:
        processor = _default_video_processor(config, video.size)
        describe = f"{type(processor).__name__} defaults at {video.size[0]}×{video.size[1]} {NO_CONFIG}"

    def clips(seed: int, start: int, count: int) -> dict[str, Any]:
        out = video_inputs(processor, video, seed, start, count)
        other = {"pixel_values": "pixel_values_videos", "pixel_values_videos": "pixel_values"}[key]
        if key not in out and other in out:
            out[key] = out.pop(other)  # the same clips (B, T, C, H, W) under the model's name
        return keep_read(out, reads)[0]

    kept, dropped = keep_read(_probe(lambda: clips(0, 0, 1), describe), reads)
    _check(kept, key, (1, *video.shape), describe, "frames (num_frames), channels and image size")
    made = Synthetic(
        "video",
        clips,
        lambda count, seed: describe_video(video, count, seed, key),
    )
    text = f"{describe}, {video.frames} frames of {video.size[0]}×{video.size[1]}"
    return Preprocessing("video", text + fed(kept, dropped), synthetic=made, feeds=tuple(kept))


def _probe(make: Any, describe: str) -> Any:
    """One clip through the processor: a processor that cannot make it is one InputError naming it."""
    try:
        return make()
    except InputError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # transformers' processors raise many types on an unusable config
        raise InputError(
            f"the {describe.split(' ')[0]} cannot preprocess a synthetic clip ({_first_line(e)})",
            "put the model's own preprocessor config beside its weights",
        ) from None


def _time_major(got: Any, mel: int) -> bool:
    """Whether one sample's features ``got`` are (1, frames, ``mel``): time first, not Whisper's (mel,
    frames)."""
    return (
        getattr(got, "ndim", 0) == 3
        and int(got.shape[0]) == 1
        and int(got.shape[2]) == mel
        and int(got.shape[1]) != mel
    )


def _check(kept: dict[str, Any], key: str, shape: tuple[int, ...], describe: str, what: str) -> None:
    """The model's input ``key`` of one sample is ``shape``; else the inputs are not what it asks for."""
    got = kept.get(key)
    if got is None:
        raise InputError(
            f"[inputs] the {describe.split(' ')[0]} makes no {key}, the input the model reads",
            "put the model's own preprocessor config beside its weights",
        )
    if tuple(got.shape) != shape:
        raise InputError(
            f"[inputs] the {describe.split(' ')[0]} makes {key} of shape {tuple(got.shape)}, but the model's"
            " config"
            f" asks for {shape}: its {what} disagree with the model's",
            "put the model's own preprocessor config beside its weights, or fix its config.json",
        )


def hf_audio_preprocessing(source: str | Path | None, config: Any, trust: bool = False) -> Preprocessing:
    """A log-mel audio encoder's preprocessing (Whisper)."""
    return audio_preprocessing(source, config, trust, "log-mel")
