"""Issue 42 (docs/breadth-audit.md, "Still open"): five `inputs` refusals that named too little or something
false, each now what the model's source shows:

- MiniCPM's vision towers pack a forward's images into one sequence, split by ``target_sizes`` (each image's
  patch grid): condcli makes the grid from the image size over ``patch_size`` and feeds one image per forward;
- SpeechT5Model's encoder without its prenet reads frames already embedded, not a waveform: said so, with the
  speech class that carries the prenet;
- Evolla runs its protein encoder only when given ``protein_input_ids``: condcli makes them (seeded random ids
  in the protein vocabulary, padded as the text is);
- Janus's VQ-VAE decoder never runs in its forward: its language model is analysed, not that decoder;
- BarkModel has no forward of its own: its first part that reads input_ids (semantic) is analysed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, stream
from condcli.inputs.model_inputs import hf_preprocessing
from condcli.loading.hf import analysed_module
from condcli.loading.sources import LoadOptions, load

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize(
    ("config_name", "model_name"),
    [
        ("MiniCPMOcrVisionConfig", "MiniCPMOcrVisionModel"),
        ("MiniCPMV4_7VisionConfig", "MiniCPMV4_7VisionModel"),
    ],
)
def test_a_packing_vision_tower_gets_its_patch_grid_one_image_at_a_time(
    config_name: str, model_name: str, tmp_path: Path
) -> None:
    config = getattr(transformers, config_name)(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=64,
        patch_size=16,
    )
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config).eval()
    model.save_pretrained(tmp_path / "m")
    loaded = load(str(tmp_path / "m"), LoadOptions(device="cpu"))
    pre = loaded.preprocessing
    assert "target_sizes" in pre.feeds and pre.per_forward == 1
    assert "one image per forward" in pre.describe
    batches = list(stream(pre, InputSpec(max_samples=3, batch_size=8)))
    assert [b.size for b in batches] == [1, 1, 1]
    inputs = batches[0].inputs
    assert inputs["pixel_values"].shape == (1, 3, 64, 64)
    assert inputs["target_sizes"].tolist() == [[4, 4]]
    with torch.no_grad():
        out = loaded.model(**inputs)
    assert out.last_hidden_state.shape == (1, 16, 32)


def test_an_encoder_that_reads_embedded_frames_is_refused_as_such(tmp_path: Path) -> None:
    config = transformers.SpeechT5Config(
        hidden_size=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
    )
    transformers.SpeechT5Model(config).save_pretrained(tmp_path / "m")
    with pytest.raises(InputError) as e:
        load(str(tmp_path / "m"), LoadOptions(device="cpu"))
    said = e.value.message
    assert said.startswith("[inputs] SpeechT5EncoderWithoutPrenet reads input_values as frames already")
    assert "(batch, frames, 32)" in said and "no convolution" in said
    assert "SpeechT5ForSpeechToText" in str(e.value.hint)


def test_a_waveform_model_with_a_feature_encoder_still_gets_a_waveform() -> None:
    config = transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    pre = hf_preprocessing(None, transformers.Wav2Vec2Model(config), "audio")
    assert "input_values" in pre.feeds


def test_a_second_encoder_gets_its_own_token_ids() -> None:
    config = transformers.EvollaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=300,
        aligner_num_add_layers=1,
        resampler_depth=1,
        resampler_heads=2,
        resampler_dim_head=16,
        resampler_num_latents=8,
        protein_encoder_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
        },
    )
    torch.manual_seed(0)
    model = transformers.EvollaModel(config).eval()
    pre = hf_preprocessing(None, model, "text")
    vocab = config.protein_encoder_config.vocab_size
    assert {"protein_input_ids", "protein_attention_mask"} <= set(pre.feeds)
    assert f"{vocab}-token vocabulary of its protein encoder" in pre.describe
    one = next(iter(stream(pre, InputSpec(max_samples=3, batch_size=3)))).inputs
    two = [b.inputs for b in stream(pre, InputSpec(max_samples=3, batch_size=2))]
    ids = one["protein_input_ids"]
    assert ids.shape == one["input_ids"].shape and int(ids.max()) < vocab
    assert torch.equal(ids, torch.cat([b["protein_input_ids"] for b in two]))  # not the batch's doing
    ran: list[bool] = []
    model.protein_encoder.register_forward_hook(lambda *_: ran.append(True))
    with torch.no_grad():
        model(**one)
    assert ran


def test_a_part_the_forward_never_runs_is_not_analysed() -> None:
    config = transformers.JanusConfig(
        text_config={
            "model_type": "llama",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "vocab_size": 100,
        },
        vision_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 64},
        vq_config={
            "base_channels": 32,
            "latent_channels": 32,
            "channel_multiplier": [1, 2],
            "num_res_blocks": 1,
            "embed_dim": 8,
            "num_embeddings": 64,
            "num_patches": 4,
        },
    )
    model = transformers.JanusModel(config)
    part, notes = analysed_module(model)
    assert part is model.language_model
    assert notes[0].startswith("analysed: its part language_model (LlamaModel): JanusModel's forward never")
    assert "vqmodel" in notes[0]


def test_a_model_with_no_forward_is_analysed_on_a_part_that_has_one() -> None:
    small = {"hidden_size": 32, "num_heads": 2, "num_layers": 1, "block_size": 64}
    config = transformers.BarkConfig(
        semantic_config=small,
        coarse_acoustics_config=small,
        fine_acoustics_config=small,
        codec_config={"hidden_size": 32, "num_filters": 8, "upsampling_ratios": [4, 4]},
    )
    model = transformers.BarkModel(config)
    assert type(model).forward is nn.Module.forward
    part, notes = analysed_module(model)
    assert part is model.semantic
    assert "BarkModel has no forward of its own" in notes[0]
    assert "semantic is the first that reads input_ids" in notes[0]
