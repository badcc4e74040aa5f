"""Conformance cases for models that read video or audio (family "generic"; issue 29, point 6).

VideoMAE on clips (``pixel_values`` (B, T, C, H, W), tubelets of 2 frames: the generic path's trial forward
makes clips of the config's ``num_frames``), AST on spectrograms (``input_values`` (B, frames, mel bins)),
Wav2Vec2 on waveforms (``input_values`` (B, samples), a convolutional feature encoder and a convolutional
position embedding before the first block), Speech2Text's encoder on filterbank frames (``input_features`` (B,
frames, bins)), and Siglip2's vision encoder on what its processor makes: patches, a patch mask (the second
image padded) and each image's patch grid. Inputs are seeded random numbers of the shapes each model reads;
references are the model's own ``hidden_states`` and ``output_attentions`` under eager attention, and W each
projection's own weight, transposed (VideoMAE's key has no bias: its k bias is zero).
"""

from __future__ import annotations

from typing import Any

import torch
import transformers as tf
from torch import nn

from condcli.inputs.batches import Batch
from tests.cases_encoders import linear_site, seeded
from tests.families import INIT, LAYERS, B, Case, Site

D, H = 32, 4
SMALL = {
    "hidden_size": D,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": H,
    "intermediate_size": 64,
    "initializer_range": INIT,
}
FRAMES, SIZE = 4, 16  # VideoMAE: frames per clip, image side (tubelet 2 × 8×8 patches: 2·4 = 8 tokens)
MELS, LENGTH = 16, 32  # AST: mel bins, frames (8×8 patches, stride 8: 2·4 patches + 2 prefix tokens)
SAMPLES = 400  # Wav2Vec2: audio samples per clip (strides 5, 4: 19 frames)


def _named(what: str) -> list[str]:
    return [f"{what}{i}" for i in range(B)]


def videomae() -> nn.Module:
    torch.manual_seed(0)
    cfg = tf.VideoMAEConfig(image_size=SIZE, patch_size=8, num_frames=FRAMES, tubelet_size=2, **SMALL)
    return seeded(tf.VideoMAEModel(cfg))


def clips() -> Batch:
    pixels = torch.randn(B, FRAMES, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
    return Batch({"pixel_values": pixels}, None, _named("clip"))


def videomae_sites(m: Any) -> list[Site]:
    out = []
    for layer in m.encoder.layer:
        a = layer.attention.attention
        w = {
            "q": (a.query.weight.T, a.query.bias),
            "k": (a.key.weight.T, a.key.bias),
            "v": (a.value.weight.T, a.value.bias),
        }
        out.append(Site(a, layer.attention.output.dense, w, H))
    return out


def ast() -> nn.Module:
    torch.manual_seed(0)
    cfg = tf.ASTConfig(
        num_mel_bins=MELS, max_length=LENGTH, patch_size=8, frequency_stride=8, time_stride=8, **SMALL
    )
    return seeded(tf.ASTModel(cfg))


def spectrograms() -> Batch:
    values = torch.randn(B, LENGTH, MELS, generator=torch.Generator().manual_seed(1))
    return Batch({"input_values": values}, None, _named("spectrogram"))


def ast_sites(m: Any) -> list[Site]:
    return [
        linear_site(a, a.o_proj, a.q_proj, a.k_proj, a.v_proj)
        for a in (layer.attention for layer in m.layers)
    ]


def wav2vec2() -> nn.Module:
    torch.manual_seed(0)
    cfg = tf.Wav2Vec2Config(
        conv_dim=(16, 16),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2,
        **SMALL,
    )
    return seeded(tf.Wav2Vec2Model(cfg))


def waveforms() -> Batch:
    values = torch.randn(B, SAMPLES, generator=torch.Generator().manual_seed(1))
    return Batch({"input_values": values}, None, _named("clip"))


def wav2vec2_sites(m: Any) -> list[Site]:
    return [
        linear_site(a, a.out_proj, a.q_proj, a.k_proj, a.v_proj)
        for a in (layer.attention for layer in m.encoder.layers)
    ]


def siglip2() -> nn.Module:
    """Siglip2's vision encoder: it reads patches, a patch mask and each image's patch grid (its processor's
    three tensors, all required)."""
    torch.manual_seed(0)
    cfg = tf.Siglip2VisionConfig(patch_size=8, num_patches=16, **SMALL)
    return seeded(tf.Siglip2VisionModel(cfg))


def patches() -> Batch:
    """Two images as Siglip2's processor makes them: 16 patch slots each, the first one's 4×4 grid full, the
    second's 3×4 grid padded to 16 (its mask marks 12)."""
    values = torch.randn(B, 16, 3 * 8 * 8, generator=torch.Generator().manual_seed(1))
    mask = torch.ones(B, 16, dtype=torch.long)
    mask[1, 12:] = 0
    values[1, 12:] = 0.0
    shapes = torch.tensor([[4, 4], [3, 4]])
    inputs = {"pixel_values": values, "pixel_attention_mask": mask, "spatial_shapes": shapes}
    return Batch(inputs, torch.tensor([16, 12]), _named("image"))


def siglip2_sites(m: Any) -> list[Site]:
    return [
        linear_site(a, a.out_proj, a.q_proj, a.k_proj, a.v_proj)
        for a in (layer.self_attn for layer in m.encoder.layers)
    ]


def speech2text_encoder() -> nn.Module:
    """A Speech2TextModel as condcli analyses it: its encoder alone, on filterbanks (B, frames, bins)."""
    from condcli.loading.hf import analysed_module

    torch.manual_seed(0)
    sizes = {"encoder_layers": LAYERS, "decoder_layers": LAYERS, "encoder_attention_heads": H}
    cfg = tf.Speech2TextConfig(
        d_model=D,
        decoder_attention_heads=H,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=64,
        input_feat_per_channel=MELS,
        conv_channels=16,
        max_source_positions=64,
        max_target_positions=64,
        init_std=INIT,
        **sizes,
    )
    return seeded(analysed_module(tf.Speech2TextModel(cfg))[0])


def filterbanks() -> Batch:
    values = torch.randn(B, LENGTH, MELS, generator=torch.Generator().manual_seed(1))
    return Batch({"input_features": values}, None, _named("clip"))


def speech2text_sites(m: Any) -> list[Site]:
    return [
        linear_site(a, a.out_proj, a.q_proj, a.k_proj, a.v_proj)
        for a in (layer.self_attn for layer in m.layers)
    ]


CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "videomae_video_clips": Case(videomae, clips, videomae_sites),
        "ast_spectrogram": Case(ast, spectrograms, ast_sites),
        "wav2vec2_waveform": Case(wav2vec2, waveforms, wav2vec2_sites),
        "siglip2_patches_mask_and_shapes": Case(siglip2, patches, siglip2_sites),
        "speech2text_filterbank_encoder": Case(speech2text_encoder, filterbanks, speech2text_sites),
    }
}
