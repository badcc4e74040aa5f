"""track's header says whose weights it analysed: each checkpoint's own (what its folder holds), never
"pretrained weights", which a saved random-init checkpoint is not."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from tests.test_track import bert_run  # noqa: F401  (the Trainer run, a fixture)


def test_track_header_names_each_checkpoints_own_weights(
    bert_run: Path,  # noqa: F811
    cli: Callable[..., Result],
) -> None:
    result = cli("track", str(bert_run), "--layers", "none", "--max-samples", "1")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith(str(bert_run)) and "each checkpoint's own weights" in first, first
    assert "pretrained" not in result.stdout


def test_a_saved_random_init_folder_is_weights_from_that_folder(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    """A random-init BERT saved with save_pretrained: condcli cannot know how it was made, only where its
    weights come from."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    folder = tmp_path / "random-bert"
    BertModel(config).save_pretrained(folder)
    args = ("spectrum", str(folder), "--layers", "none", "--max-samples", "1", "--no-conditioned")
    result = cli(*args)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert f"weights from {folder}" in first and "pretrained" not in first, first
    report = cli(*args, "--json")
    model = json.loads(report.stdout)["model"]
    assert model["weights_label"] == f"weights from {folder}"  # the label; `weights` keeps its contract value
