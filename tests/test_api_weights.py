"""``condcli.weights`` in Python: the same report as ``condcli weights --json`` for a MODEL string, and a
module in memory read as it is (κ(E) against float64 NumPy of its own table), with the notebook views."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import condcli


def test_a_model_string_gives_the_clis_report(cli: Callable[..., Any]) -> None:
    result = cli("weights", "gpt2-docstrings", "--json")
    assert result.exit_code == 0, result.output
    report = condcli.weights("gpt2-docstrings")
    assert json.loads(json.dumps(report.to_json())) == json.loads(result.stdout)
    tables = report.tables()
    assert len(tables["layers"].rows) == 4 and "forward" not in tables["layers"].rows[0]
    assert sorted(report.plot()) == ["embedding_table"]


def test_a_module_in_memory_is_read_as_it_is() -> None:
    import transformers as tf

    torch.manual_seed(0)
    config = tf.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    model = tf.BertModel(config)
    report = condcli.weights(model).to_json()
    e = model.get_input_embeddings().weight.detach().double().numpy()
    s = np.linalg.svd(e, compute_uv=False)
    assert report["model"]["spec"] == "BertModel (in memory)"
    assert report["embedding_table"]["kappa"] == pytest.approx(s[0] / s[-1], rel=1e-6)
    wq = model.encoder.layer[0].attention.self.query.weight.detach().double().numpy().T  # d × H·d_h
    q = np.linalg.svd(wq, compute_uv=False)
    assert report["layers"][0]["kappa_wq"] == pytest.approx(q[0] / q[-1], rel=1e-6)
