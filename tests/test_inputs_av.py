"""Inputs from the model's own processor (issue 29, point 6), on tiny saved HF folders:

- a config whose ``image_size`` is a list; an image processor that makes more than ``pixel_values``
  (Siglip2: a patch mask and shapes), every tensor of it fed and padding excluded from X;
- video (VideoMAE): ``pixel_values`` (B, T, C, H, W), T from the config;
- audio: a spectrogram model (AST, ``input_values`` (B, frames, mel bins)) and waveform models (Wav2Vec2,
  HuBERT, ``input_values`` (B, samples), with the extractor's attention mask) and a filterbank encoder
  (Speech2Text, ``input_features`` (B, frames, bins));
- κ(X) equal to float64 NumPy on the model's own ``hidden_states[0]`` on those inputs (transformers' own
  class loaded from the folder, eager attention), and JSON ``inputs.kind`` "audio" / "video";
- a model whose inputs condcli cannot make is refused with one line (exit 2), never analysed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, stream
from condcli.inputs.model_inputs import hf_preprocessing
from condcli.inputs.preprocessing import hf_image_preprocessing, image_size
from condcli.loading.sources import LoadOptions, load
from tests.helpers import DTYPE_EPS, EPS, np_reported_kappa

SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}
CONV = {
    "conv_dim": (16, 16),
    "conv_stride": (5, 4),
    "conv_kernel": (10, 8),
    "num_conv_pos_embeddings": 8,
    "num_conv_pos_embedding_groups": 2,
}
FRAMES = 6  # VideoMAE's num_frames: not the family's default (16)
SAMPLES = ["--max-samples", "3", "--batch-size", "2"]


def _moved(model: nn.Module) -> nn.Module:
    """Norm weights, biases, class tokens and position embeddings off their init (ones, zeros), so that X
    is well conditioned (a LayerNorm with zero bias makes every row orthogonal to the ones vector)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias") or "token" in name or "position_embeddings" in name:
                p.normal_(0.0, 0.5)
    return model


def _build(name: str) -> tuple[nn.Module, Any]:
    import transformers as tf

    if name == "vit-list":
        return tf.ViTModel(tf.ViTConfig(image_size=[32, 32], patch_size=8, **SMALL)), None
    if name in ("siglip2", "siglip2-bare"):
        cfg = tf.Siglip2VisionConfig(patch_size=8, num_patches=16, **SMALL)
        proc = tf.Siglip2ImageProcessor(patch_size=8, max_num_patches=16) if name == "siglip2" else None
        return tf.Siglip2VisionModel(cfg), proc
    if name == "videomae":
        cfg = tf.VideoMAEConfig(image_size=32, patch_size=8, num_frames=FRAMES, tubelet_size=2, **SMALL)
        return tf.VideoMAEModel(cfg), None
    if name == "vivit":  # a 3-D convolution embeds tubelets of 2 frames
        return tf.VivitModel(
            tf.VivitConfig(image_size=32, num_frames=4, tubelet_size=[2, 8, 8], **SMALL)
        ), None
    if name in ("videomae-own", "videomae-wrong-crop"):
        cfg = tf.VideoMAEConfig(image_size=32, patch_size=8, num_frames=4, tubelet_size=2, **SMALL)
        crop = 32 if name == "videomae-own" else 24
        proc = tf.VideoMAEImageProcessor(
            size={"shortest_edge": crop}, crop_size={"height": crop, "width": crop}
        )
        return tf.VideoMAEModel(cfg), proc
    if name == "xclip-vision":
        cfg = tf.XCLIPVisionConfig(image_size=32, patch_size=8, num_frames=4, **SMALL)
        return tf.XCLIPVisionModel(cfg), None
    if name == "timesformer":
        return tf.TimesformerModel(
            tf.TimesformerConfig(image_size=32, patch_size=8, num_frames=3, **SMALL)
        ), None
    if name == "ast":
        cfg = tf.ASTConfig(
            num_mel_bins=16, max_length=32, patch_size=8, frequency_stride=8, time_stride=8, **SMALL
        )
        return tf.ASTModel(cfg), None
    if name == "ast-wrong-extractor":
        cfg = tf.ASTConfig(
            num_mel_bins=16, max_length=32, patch_size=8, frequency_stride=8, time_stride=8, **SMALL
        )
        return tf.ASTModel(cfg), tf.ASTFeatureExtractor(num_mel_bins=8, max_length=32)
    if name == "wav2vec2":
        return tf.Wav2Vec2Model(tf.Wav2Vec2Config(feat_extract_norm="layer", **CONV, **SMALL)), None
    if name == "speech2text":  # filterbank frames (B, frames, bins), its encoder alone analysed
        sizes = {
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
        }
        cfg = tf.Speech2TextConfig(
            d_model=32,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            vocab_size=64,
            input_feat_per_channel=16,
            conv_channels=16,
            max_source_positions=64,
            max_target_positions=64,
            **sizes,
        )
        return tf.Speech2TextModel(cfg), None
    assert name == "hubert"
    return tf.HubertModel(tf.HubertConfig(**CONV, **SMALL)), None


NAMES = (
    "vit-list",
    "siglip2",
    "siglip2-bare",
    "videomae",
    "videomae-own",
    "videomae-wrong-crop",
    "vivit",
    "timesformer",
    "xclip-vision",
    "ast",
    "ast-wrong-extractor",
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name in (*NAMES, "wav2vec2", "hubert", "speech2text"):
        torch.manual_seed(0)
        model, processor = _build(name)
        folder = tmp_path_factory.mktemp(name)
        _moved(model).save_pretrained(folder)
        if processor is not None:
            processor.save_pretrained(folder)
        out[name] = folder
    return out


def _hidden(folder: Path, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The model's own hidden states: its class loaded by transformers from the folder, eager attention."""
    import json

    import transformers as tf

    cls = json.loads((folder / "config.json").read_text())["architectures"][0]
    model = getattr(tf, cls).from_pretrained(folder, attn_implementation="eager").eval()
    if model.config.is_encoder_decoder:
        model = model.get_encoder()  # what condcli analyses of an encoder-decoder
    with torch.no_grad():
        hidden: tuple[torch.Tensor, ...] = model(**inputs, output_hidden_states=True).hidden_states
    return hidden


def _close(actual: list[float], xs: list[torch.Tensor]) -> None:
    """κ per sample equals float64 NumPy's on the same matrices (eps·κ relative)."""
    expected = np.array([np_reported_kappa(x.double().numpy(), DTYPE_EPS["float32"]) for x in xs])
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(actual, expected, rtol=max(1e-9, 100 * EPS * float(expected.max())))


def _batches(folder: Path, spec: InputSpec) -> list[Any]:
    return list(stream(load(str(folder), LoadOptions(device="cpu")).preprocessing, spec))


@pytest.mark.parametrize(
    ("name", "kind", "shape"),
    [
        ("vit-list", "synthetic", {"pixel_values": (2, 3, 32, 32)}),
        ("videomae", "video", {"pixel_values": (2, FRAMES, 3, 32, 32)}),
        ("videomae-own", "video", {"pixel_values": (2, 4, 3, 32, 32)}),
        ("vivit", "video", {"pixel_values": (2, 4, 3, 32, 32)}),
        ("ast", "audio", {"input_values": (2, 32, 16)}),
        ("wav2vec2", "audio", {"input_values": (2, 16000), "attention_mask": (2, 16000)}),
        ("hubert", "audio", {"input_values": (2, 16000)}),
        (
            "speech2text",
            "audio",
            {"input_features": (2, 98, 16), "attention_mask": (2, 98)},
        ),  # 1 s: 98 frames
    ],
)
def test_x_is_the_models_own_first_hidden_state_on_the_inputs_it_asks_for(
    name: str,
    kind: str,
    shape: dict[str, tuple[int, ...]],
    folders: dict[str, Path],
    cli_json: Callable[..., dict[str, Any]],
) -> None:
    folder = folders[name]
    r = cli_json("spectrum", str(folder), *SAMPLES)
    assert r["inputs"]["kind"] == kind and r["inputs"]["count"] == 3
    assert r["embedding"]["below_precision"] == 0  # measured values, not floors
    batches = _batches(folder, InputSpec(max_samples=3, batch_size=2))
    assert {k: tuple(v.shape) for k, v in batches[0].inputs.items()} == shape  # every tensor, from the config
    xs = [x for b in batches for x in _hidden(folder, b.inputs)[0]]
    _close(r["embedding"]["kappa"]["per_sample"], xs)
    for layer in r["layers"]:
        hidden = [x for b in batches for x in _hidden(folder, b.inputs)[layer["index"]]]
        _close(layer["kappa"]["per_sample"], hidden)


def test_every_tensor_the_image_processor_makes_is_fed_and_its_padding_left_out_of_x(
    folders: dict[str, Path], tmp_path: Path, cli_json: Callable[..., dict[str, Any]]
) -> None:
    folder = folders["siglip2"]
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(30, 40), (48, 48), (20, 60)]):  # aspect ratios that need padding
        Image.fromarray((rng.random((h, w, 3)) * 255).astype(np.uint8)).save(tmp_path / f"{i}.png")
    r = cli_json("spectrum", str(folder), "--images", str(tmp_path), *SAMPLES)
    batches = _batches(folder, InputSpec(images=tmp_path, max_samples=3, batch_size=2))
    keys = {"pixel_values", "pixel_attention_mask", "spatial_shapes"}
    assert all(set(b.inputs) == keys for b in batches)
    lengths = [int(n) for b in batches for n in b.inputs["pixel_attention_mask"].sum(1)]
    assert lengths == [12, 16, 12]  # each padded to the processor's 16 patches
    assert [int(n) for b in batches for n in b.lengths] == lengths  # type: ignore[union-attr]
    xs = [x for b in batches for x in _hidden(folder, b.inputs)[0]]
    _close(r["embedding"]["kappa"]["per_sample"], [x[:n] for x, n in zip(xs, lengths, strict=True)])
    assert "feeds pixel_values, pixel_attention_mask, spatial_shapes" in r["inputs"]["preprocessing"]


def test_the_model_receives_what_the_processor_made(folders: dict[str, Path]) -> None:
    from condcli.capture import capture

    loaded = load(str(folders["wav2vec2"]), LoadOptions(device="cpu"))
    (batch,) = list(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))
    seen: dict[str, torch.Tensor] = {}

    def record(_m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.update({k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)})

    handle = loaded.model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        capture(loaded.adapter, batch, layers=[])
    finally:
        handle.remove()
    assert set(seen) == {"input_values", "attention_mask"}
    assert all(torch.equal(seen[k], batch.inputs[k]) for k in seen)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("siglip2-bare", "requires pixel_attention_mask, spatial_shapes"),
        # TimeSformer's divided space-time attention regroups the tokens before q/k/v: coded so (issue 42)
        ("timesformer", "[qkv-unreadable] the first attention block 'encoder.layer.0.temporal_attention'"),
        ("xclip-vision", "has a frame count (num_frames 4) but embeds frames one by one"),
        ("ast-wrong-extractor", "makes input_values of shape (1, 32, 8), but the model's config asks for"),
        ("videomae-wrong-crop", "makes pixel_values of shape (1, 4, 3, 24, 24), but the model's config asks"),
    ],
)
def test_a_model_whose_inputs_condcli_cannot_make_is_refused_in_one_line(
    name: str, says: str, folders: dict[str, Path], cli: Callable[..., Any]
) -> None:
    result = cli("spectrum", str(folders[name]), *SAMPLES, "--json")
    assert result.exit_code == 2 and result.stdout == ""
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert re.match(r"error: \[(inputs|qkv-unreadable|p-unobservable)\] ", result.stderr), result.stderr


def test_images_given_to_a_video_model_are_refused(folders: dict[str, Path], cli: Callable[..., Any]) -> None:
    result = cli("spectrum", str(folders["videomae"]), "--images", str(folders["videomae"]))
    assert result.exit_code == 2 and "--images was given for a video model" in result.stderr


def test_a_main_input_condcli_cannot_make_is_refused() -> None:
    class Points(nn.Module):
        main_input_name = "input_points"
        config = type("Config", (), {"model_type": "toy"})()

        def forward(self, input_points: torch.Tensor) -> torch.Tensor:
            return input_points

    with pytest.raises(InputError, match="reads input_points, an input condcli cannot make"):
        hf_preprocessing(None, Points(), "text")


@pytest.mark.parametrize(
    ("value", "size"),
    [(24, (24, 24)), ([24, 32], (24, 32)), ((24, 32), (24, 32)), ({"height": 8, "width": 16}, (8, 16))],
)
def test_image_size_may_be_a_list_or_a_pair(value: Any, size: tuple[int, int]) -> None:
    from types import SimpleNamespace

    config = SimpleNamespace(image_size=value)  # a dict: configs of other families (ViTConfig refuses one)
    assert image_size(config) == size
    pre = hf_image_preprocessing(None, config)
    assert pre.image_transform is not None
    assert tuple(pre.image_transform(Image.new("RGB", (50, 40))).shape) == (3, *size)


@pytest.mark.parametrize("value", ["big", [24], [0, 8], True, None])
def test_an_unusable_image_size_is_one_error(value: Any) -> None:
    config = type("Config", (), {"image_size": value})()
    with pytest.raises(InputError, match="gives image_size as"):
        image_size(config)


def test_the_models_own_video_processor_is_used(folders: dict[str, Path]) -> None:
    pre = load(str(folders["videomae-own"]), LoadOptions(device="cpu")).preprocessing
    assert pre.describe.startswith(f"VideoMAEVideoProcessor from {folders['videomae-own']}")
    bare = load(str(folders["videomae"]), LoadOptions(device="cpu")).preprocessing
    assert "defaults at 32×32 (the model has no preprocessor config)" in bare.describe


def test_a_frame_count_alone_does_not_make_a_video_model() -> None:
    import transformers as tf

    from condcli.adapters.generic.vision import clip_frames

    torch.manual_seed(0)
    frames = tf.XCLIPVisionModel(tf.XCLIPVisionConfig(image_size=32, patch_size=8, num_frames=4, **SMALL))
    assert clip_frames(frames) is None  # X-CLIP's vision encoder reads frames one by one
    clips = tf.VideoMAEModel(tf.VideoMAEConfig(image_size=32, patch_size=8, num_frames=FRAMES, **SMALL))
    assert clip_frames(clips) == FRAMES


@pytest.mark.parametrize(
    ("model", "file", "text", "says"),
    [
        (
            "videomae",
            "video_preprocessor_config.json",
            "garbage",
            "video_preprocessor_config.json: invalid JSON",
        ),
        (
            "videomae",
            "video_preprocessor_config.json",
            '{"video_processor_type": "VideoMAEVideoProcessor", "crop_size": {"height": -3, "width": 0}}',
            f"but the model's config asks for (1, {FRAMES}, 3, 32, 32)",
        ),
        ("ast", "preprocessor_config.json", "{not json", "the feature extractor in"),
        (
            "ast",
            "preprocessor_config.json",
            '{"feature_extractor_type": "ASTFeatureExtractor", "num_mel_bins": 0}',
            "makes input_values of shape (1, 1024, 0), but the model's config asks for (1, 32, 16)",
        ),
    ],
)
def test_a_broken_audio_or_video_processor_is_one_line(
    model: str,
    file: str,
    text: str,
    says: str,
    folders: dict[str, Path],
    tmp_path: Path,
    cli: Callable[..., Any],
) -> None:
    import shutil

    folder = tmp_path / model
    shutil.copytree(folders[model], folder)
    (folder / file).write_text(text)
    result = cli("spectrum", str(folder), "--max-samples", "1", "--json")
    assert result.exit_code == 2 and result.stdout == ""
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_feature_extractor_whose_backend_is_missing_is_an_inputs_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers stands a dummy class in for an extractor whose library is not installed (NeuCodec's
    needs torchaudio): building it raises ImportError, which is one [inputs] line naming it (issue 42)."""
    from condcli.inputs import preprocessing_av
    from condcli.reports.refusal import Refused

    class NeedsTorchaudio:
        def __init__(self, **_: Any) -> None:
            raise ImportError(
                "\nNeedsTorchaudio requires the torchaudio library but it was not found in your environment. "
                "Please install it and restart your\nruntime.\n"
            )

    monkeypatch.setattr(preprocessing_av, "_family_class", lambda config, names: NeedsTorchaudio)
    config = type("Config", (), {"model_type": "neucodec"})()
    with pytest.raises(Refused) as e:
        preprocessing_av._default_extractor("waveform", config)
    assert e.value.code == "inputs"
    assert str(e.value).startswith(
        "[inputs] the neucodec model's feature extractor cannot be built here: NeedsTorchaudio requires the"
        " torchaudio library but it was not found in your environment — install the library it names"
    )


@pytest.mark.parametrize(
    ("model_type", "key", "layout", "what"),
    [
        # Parakeet's extractor makes (B, frames, mel), the layout its subsampling reads (mel last)
        (
            "parakeet_encoder",
            "input_features",
            lambda s: s[0] == 1 and s[2] == 80 and s[1] > 80,
            "frames × bins",
        ),
        # Mimi's (Encodec's) extractor makes (B, channels, samples)
        ("mimi", "input_values", lambda s: s[:2] == (1, 1) and s[2] >= 24000, "channels × samples"),
    ],
)
def test_audio_taken_in_the_layout_its_own_extractor_makes(
    model_type: str, key: str, layout: Callable[[tuple[int, ...]], bool], what: str, tmp_path: Path
) -> None:
    """Issue 42 (docs/breadth-audit.md): these were refused because the features their family's extractor
    makes were checked against Whisper's (mel, frames) or a 1-D waveform; they are fed as made, and the
    model runs on them."""
    from bench.sweep_architectures import build_hf

    build_hf(model_type, tmp_path / "m")
    loaded = load(str(tmp_path / "m"), LoadOptions(device="cpu"))
    assert what in loaded.preprocessing.describe
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=1, batch_size=1))))
    assert layout(tuple(batch.inputs[key].shape))
    with torch.no_grad():
        loaded.adapter.run(batch.inputs)  # the model takes them
