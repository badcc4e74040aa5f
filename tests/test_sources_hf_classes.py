"""An HF folder loads as the class its config.json names, and condcli analyses the right part of it: the base
model under a task head, the encoder of an encoder-decoder (T5, Whisper). Checked end to end through the
CLI against the hidden states of the same class loaded by transformers itself."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import DTYPE_EPS, EPS, np_reported_kappa

SAMPLES = ["--max-samples", "3", "--batch-size", "3"]
TINY = {"vocab_size": 64}


def _llama() -> Any:
    import transformers as tf

    cfg = tf.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, **TINY
    )
    return tf.LlamaForCausalLM(cfg)


def _opt() -> Any:
    import transformers as tf

    cfg = tf.OPTConfig(
        hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, word_embed_proj_dim=32, **TINY
    )
    return tf.OPTForCausalLM(cfg)


def _gpt2() -> Any:
    import transformers as tf

    return tf.GPT2LMHeadModel(tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, **TINY))


def _bert() -> Any:
    import transformers as tf

    cfg = tf.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, **TINY
    )
    return tf.BertForMaskedLM(cfg)


def _t5_config() -> Any:
    import transformers as tf

    return tf.T5Config(d_model=32, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=8, **TINY)


def _t5_encoder() -> Any:
    import transformers as tf

    return tf.T5EncoderModel(_t5_config())


def _t5_full() -> Any:
    import transformers as tf

    return tf.T5ForConditionalGeneration(_t5_config())


def _whisper_config() -> Any:
    import transformers as tf

    return tf.WhisperConfig(
        d_model=32,
        encoder_layers=2,
        encoder_attention_heads=4,
        decoder_layers=2,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_mel_bins=16,
        max_source_positions=16,
        max_target_positions=16,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        suppress_tokens=[],
        begin_suppress_tokens=[],
        **TINY,
    )


def _whisper() -> Any:
    import transformers as tf

    return tf.WhisperForConditionalGeneration(_whisper_config())


def _whisper_bare() -> Any:
    import transformers as tf

    return tf.WhisperModel(_whisper_config())


BUILDERS: dict[str, Callable[[], Any]] = {
    "llama": _llama,
    "opt": _opt,
    "gpt2": _gpt2,
    "bert": _bert,
    "t5-encoder": _t5_encoder,
    "t5": _t5_full,
    "whisper": _whisper,
    "whisper-bare": _whisper_bare,
}
# the class transformers loads the folder as, and the module condcli analyses (its class name)
EXPECTED = {
    "llama": ("LlamaForCausalLM", "LlamaModel"),
    "opt": ("OPTForCausalLM", "OPTModel"),
    "gpt2": ("GPT2LMHeadModel", "GPT2Model"),
    "bert": ("BertForMaskedLM", "BertModel"),
    "t5-encoder": ("T5EncoderModel", "T5EncoderModel"),
    "t5": ("T5ForConditionalGeneration", "T5Stack"),
    "whisper": ("WhisperForConditionalGeneration", "WhisperEncoder"),
    "whisper-bare": ("WhisperModel", "WhisperEncoder"),
}


def _close(actual: list[float], X: torch.Tensor) -> None:
    """κ per sample equals numpy's within what a backward-stable SVD promises (eps·κ relative); below the
    capture's resolution, the floor σ_1/tol (docs/math.md#spectra)."""
    expected = np_reported_kappa(X.double().numpy(), DTYPE_EPS[str(X.dtype).removeprefix("torch.")])
    np.testing.assert_allclose(actual, expected, rtol=max(1e-9, 100 * EPS * float(expected.max())))


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from transformers import WhisperFeatureExtractor

    out = {}
    for name, build in BUILDERS.items():
        torch.manual_seed(0)
        folder = tmp_path_factory.mktemp(name)
        build().save_pretrained(folder)
        out[name] = folder
    WhisperFeatureExtractor(feature_size=16).save_pretrained(out["whisper"])  # whisper-bare has none
    return out


def _reference(name: str, folder: Path, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The hidden states of the analysed part, from the class transformers loads (eager attention)."""
    import transformers as tf

    model = getattr(tf, EXPECTED[name][0]).from_pretrained(folder, attn_implementation="eager").eval()
    part = model.get_encoder() if name in ("t5", "whisper", "whisper-bare") else model
    with torch.no_grad():
        hidden: tuple[torch.Tensor, ...] = part(**inputs, output_hidden_states=True).hidden_states
    return hidden


@pytest.mark.parametrize("name", list(BUILDERS))
def test_folder_loads_as_its_config_says(name: str, folders: dict[str, Path]) -> None:
    loaded = load(str(folders[name]), LoadOptions(device="cpu"))
    cls, analysed = EXPECTED[name]
    assert f"loaded as {cls} (config.json architectures)" in loaded.notes
    assert type(loaded.model).__name__ == analysed
    assert not any("decoder" in n for n, _ in loaded.model.named_modules() if name.startswith(("t5", "wh")))


@pytest.mark.parametrize("name", ["llama", "opt", "gpt2", "bert", "whisper", "whisper-bare"])
def test_spectrum_x_and_x_l_are_the_loaded_class_hidden_states(
    name: str, folders: dict[str, Path], cli_json: Callable[..., dict[str, Any]]
) -> None:
    folder = folders[name]
    r = cli_json("spectrum", str(folder), *SAMPLES)
    pre = load(str(folder), LoadOptions(device="cpu")).preprocessing
    (batch,) = list(stream(pre, InputSpec(max_samples=3, batch_size=3)))
    hidden = _reference(name, folder, batch.inputs)
    _close(r["embedding"]["kappa"]["per_sample"], hidden[0])
    assert len(r["layers"]) == 2
    for layer in r["layers"]:
        _close(layer["kappa"]["per_sample"], hidden[layer["index"]])


def test_whisper_inputs_are_labelled_synthetic(folders: dict[str, Path]) -> None:
    own = load(str(folders["whisper"]), LoadOptions(device="cpu")).preprocessing
    assert own.describe.startswith(f"WhisperFeatureExtractor from {folders['whisper']}")
    s = stream(own, InputSpec(max_samples=3, batch_size=2))
    assert s.kind == "audio" and "synthetic audio clips" in s.description
    shapes = [tuple(b.inputs["input_features"].shape) for b in s]
    assert shapes == [(2, 16, 32), (1, 16, 32)]
    bare = load(str(folders["whisper-bare"]), LoadOptions(device="cpu")).preprocessing
    assert "no preprocessor config" in bare.describe


def test_t5_encoder_x_is_the_encoder_hidden_states(
    folders: dict[str, Path], cli_json: Callable[..., dict[str, Any]]
) -> None:
    for name in ("t5-encoder", "t5"):
        folder = folders[name]
        r = cli_json("spectrum", str(folder), *SAMPLES, "--layers", "none")
        pre = load(str(folder), LoadOptions(device="cpu")).preprocessing
        (batch,) = list(stream(pre, InputSpec(max_samples=3, batch_size=3)))
        _close(r["embedding"]["kappa"]["per_sample"], _reference(name, folder, batch.inputs)[0])


def test_checkpoint_of_the_whole_model_or_of_its_base_loads(folders: dict[str, Path], tmp_path: Path) -> None:
    import transformers as tf

    folder = folders["llama"]
    source = tf.LlamaForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        source.model.embed_tokens.weight.mul_(2.0)
    torch.save(source.state_dict(), tmp_path / "whole.pt")
    torch.save(source.model.state_dict(), tmp_path / "base.pt")
    for file in ("whole.pt", "base.pt"):
        loaded = load(str(folder), LoadOptions(device="cpu", checkpoint=tmp_path / file))
        got = loaded.model.get_submodule("embed_tokens").weight
        assert torch.equal(got, source.model.embed_tokens.weight)


def test_t5_encoder_layers_are_the_encoder_hidden_states(
    folders: dict[str, Path], cli_json: Callable[..., dict[str, Any]]
) -> None:
    for name in ("t5-encoder", "t5"):
        folder = folders[name]
        r = cli_json("spectrum", str(folder), *SAMPLES)
        pre = load(str(folder), LoadOptions(device="cpu")).preprocessing
        (batch,) = list(stream(pre, InputSpec(max_samples=3, batch_size=3)))
        hidden = _reference(name, folder, batch.inputs)
        assert len(r["layers"]) == 2
        for layer in r["layers"]:
            _close(layer["kappa"]["per_sample"], hidden[layer["index"]])
