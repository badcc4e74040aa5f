"""Audio, video and image inputs in the layout the model's own source reads (issue 42, docs/breadth-audit.md
"transformers: `inputs`"), on tiny random configs saved to a folder:

- mel bins in a nested sub-config (``encoder_config``, ``audio_config``) and the feature extractor of the
  model's family: the one mapped for its model type, else for another model type of the same transformers
  module (a part's config: Nemotron 3.5 Transcribe's ASR encoder has none of its own), fed time-major
  (B, frames, mel) as that extractor makes it;
- an extractor mapped for the family that makes another input (W2V-BERT's maps Wav2Vec2's waveform
  extractor) is not used: synthetic (frames, feature_projection_input_dim) features;
- a waveform encoder with no extractor of its own (Mimi's): its family's, (B, 1, samples); with none at all,
  the raw synthetic waveform;
- a main input named for a mel spectrogram (Gemma 3n's ``audio_mel``) is made; a required mask beside it
  that no extractor makes is named in a one-line refusal;
- ``pixel_values_videos`` (V-JEPA 2) gets video clips of the config's frames and crop;
- SAM's image size is its ``vision_config``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from condcli.inputs.batches import InputSpec, stream
from condcli.inputs.preprocessing_av import audio_preprocessing
from condcli.loading.sources import LoadOptions, load

TINY = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}


def _build(name: str) -> nn.Module:
    import transformers as tf

    if name == "parakeet_ctc":  # mel bins in encoder_config
        encoder = tf.ParakeetEncoderConfig(num_mel_bins=40, subsampling_conv_channels=8, **TINY)
        return tf.ParakeetForCTC(tf.ParakeetCTCConfig(encoder_config=encoder.to_dict(), vocab_size=16))
    if name == "nemotron3_5_transcribe_asr_audio":  # (B, frames, mel) stacked 8 frames at a time
        return tf.Nemotron3_5TranscribeAsrAudioModel(
            tf.Nemotron3_5TranscribeAsrAudioConfig(num_mel_bins=40, **TINY)
        )
    if name == "wav2vec2-bert":
        config = tf.Wav2Vec2BertConfig(feature_projection_input_dim=24, conv_depthwise_kernel_size=3, **TINY)
        return tf.Wav2Vec2BertModel(config)
    if name == "mimi_encoder":
        from transformers.models.mimi.configuration_mimi import MimiEncoderConfig
        from transformers.models.mimi.modeling_mimi import MimiEncoderModel

        config = MimiEncoderConfig(**TINY, num_key_value_heads=2, num_filters=4, codebook_dim=16)
        return MimiEncoderModel(config)
    if name == "gemma3n_audio":
        from transformers.models.gemma3n.modeling_gemma3n import Gemma3nAudioEncoder

        config = tf.Gemma3nAudioConfig(input_feat_size=32, hidden_size=32, conf_num_hidden_layers=1)
        return Gemma3nAudioEncoder(config)
    if name == "vjepa2":
        config = tf.VJEPA2Config(
            crop_size=32, frames_per_clip=4, patch_size=16, tubelet_size=2, pred_num_hidden_layers=1, **TINY
        )
        return tf.VJEPA2Model(config)
    assert name == "sam"
    vision = {"image_size": 64, "patch_size": 16, "output_channels": 32, "window_size": 2, **TINY}
    vision.update(num_pos_feats=16, global_attn_indexes=[0])
    return tf.SamModel(
        tf.SamConfig(
            vision_config=vision,
            prompt_encoder_config={"image_size": 64, "patch_size": 16, "hidden_size": 32},
            mask_decoder_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2},
        )
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            torch.manual_seed(0)
            made[name] = tmp_path_factory.mktemp(name)
            _build(name).save_pretrained(made[name])
        return made[name]

    return get


def _run(folder: Path) -> tuple[str, dict[str, tuple[int, ...]]]:
    """(what condcli says it feeds, the shapes of one batch), the model run on that batch."""
    loaded = load(str(folder), LoadOptions(device="cpu"))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    with torch.no_grad():
        loaded.adapter.run(batch.inputs)  # the model takes them
    return loaded.preprocessing.describe, {k: tuple(v.shape) for k, v in batch.inputs.items()}


@pytest.mark.parametrize(
    ("name", "says", "shapes"),
    [
        (  # was: "a layout condcli does not know (its config names neither num_mel_bins …)"
            "parakeet_ctc",
            "ParakeetFeatureExtractor defaults",
            {"input_features": (2, 101, 40), "attention_mask": (2, 101)},
        ),
        (  # was: fed (2, 40, 3000) synthetic features: "mat1 and mat2 shapes cannot be multiplied"
            "nemotron3_5_transcribe_asr_audio",
            "NemotronAsrStreamingFeatureExtractor defaults",
            {"input_features": (2, 101, 40), "attention_mask": (2, 101)},
        ),
        (  # was: the layout refusal; the mapped Wav2Vec2FeatureExtractor makes input_values
            "wav2vec2-bert",
            "no feature extractor: synthetic filterbank features, 100 × 24",
            {"input_features": (2, 100, 24)},
        ),
        (  # was: "it has no feature extractor and transformers names none for its family"
            "mimi_encoder",
            "EncodecFeatureExtractor defaults",
            {"input_values": (2, 1, 24000), "padding_mask": (2, 24000)},
        ),
        (  # was: "reads pixel_values_videos, an input condcli cannot make"
            "vjepa2",
            "VJEPA2VideoProcessor defaults at 32×32",
            {"pixel_values_videos": (2, 4, 3, 32, 32)},
        ),
        (  # was: fed 224×224: "Input image size (224*224) doesn't match model (64*64)"
            "sam",
            "defaults at 64×64",
            {"pixel_values": (2, 3, 64, 64)},
        ),
    ],
)
def test_inputs_in_the_layout_the_models_source_reads(
    name: str, says: str, shapes: dict[str, tuple[int, ...]], folder: Callable[[str], Path]
) -> None:
    describe, made = _run(folder(name))
    assert says in describe
    assert made == shapes


def test_a_mel_input_is_made_and_a_mask_no_extractor_makes_is_named(
    folder: Callable[[str], Path], cli: Callable[..., Any]
) -> None:
    """Gemma 3n's audio encoder reads audio_mel (B, frames, mel) and a required audio_mel_mask: the features
    are made (its family's extractor), the mask is not (its extractor's input_features_mask marks the
    valid frames; which value the encoder takes for padding is its own convention)."""
    result = cli("spectrum", str(folder("gemma3n_audio")), "--max-samples", "1", "--json")
    assert result.exit_code == 2 and result.stdout == ""
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("error: [inputs] Gemma3nAudioEncoder.forward requires")
    assert "requires audio_mel_mask" in line and "they carry audio_mel;" in line
    assert "Gemma3nAudioFeatureExtractor defaults" in line and "cannot make" not in line


def test_a_waveform_needs_no_extractor() -> None:
    """No extractor anywhere (its model type is no transformers family): the synthetic clip itself, at the
    config's sampling rate, with the config's audio channels."""
    for channels, shape in ((None, (2, 8000)), (2, (2, 2, 8000))):
        config = SimpleNamespace(model_type="toy", sampling_rate=8000, audio_channels=channels)
        pre = audio_preprocessing(None, config, kind="waveform", reads=frozenset({"input_values"}))
        assert pre.describe.startswith("no feature extractor: the raw synthetic waveform")
        assert pre.synthetic is not None
        inputs = pre.synthetic.make(0, 0, 2)
        assert tuple(inputs["input_values"].shape) == shape
        assert float(inputs["input_values"].abs().max()) == pytest.approx(0.5)  # the clip, not noise features


def test_an_extractor_whose_backend_is_missing_is_refused_even_on_a_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers' dummy class raises ImportError on any attribute (FunASR-Nano's extractor, without
    torchaudio): looking at what it makes is one [inputs] line, not a crash."""
    from condcli.inputs import preprocessing_av
    from condcli.reports.refusal import Refused

    class Dummy(type):
        def __getattribute__(cls, name: str) -> Any:
            if name.startswith("_"):
                return super().__getattribute__(name)
            raise ImportError("\nDummyExtractor requires the torchaudio library but it was not found.")

    dummy = Dummy("DummyExtractor", (), {})
    monkeypatch.setattr(preprocessing_av, "_family_class", lambda config, names: dummy)
    with pytest.raises(Refused) as e:
        preprocessing_av._default_extractor("log-mel", SimpleNamespace(model_type="fun_asr_nano_encoder"))
    assert e.value.code == "inputs" and "DummyExtractor requires the torchaudio library" in str(e.value)
