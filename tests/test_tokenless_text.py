"""A text sample the model's tokenizer gives no token (a line of characters its normaliser removes) never
reaches the model: it is left out of its batch, counted in ``inputs.skipped`` and named in a note; where
every sample is such a line, the run is refused in one line (exit 2) rather than crashing on an empty X."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from click.testing import Result

from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from tests.repeated_prompt import word_level_llama

ZW = "\u200b"  # a zero-width space: the tokenizer's normaliser removes it
GOOD = ["w1 w2 w3", "w4 w5 w6 w7 w8", "w9"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama whose word-level tokenizer removes zero-width spaces and adds no special token."""
    from tokenizers import normalizers

    folder = tmp_path_factory.mktemp("tokenless") / "model"
    words = ["<pad>", "<unk>", *[f"w{i}" for i in range(1, 10)]]
    word_level_llama(folder, words, normalizer=normalizers.Replace(ZW, ""))
    return folder


def test_a_tokenless_line_is_left_out_of_its_batch_and_the_rest_are_exact(
    model: Path, tmp_path: Path
) -> None:
    text = tmp_path / "lines.txt"
    text.write_text(f"{GOOD[0]}\n{ZW}\n{GOOD[1]}\n{ZW} {ZW}\n{GOOD[2]}\n", encoding="utf-8")
    loaded = load(str(model), LoadOptions(device="cpu"))
    made = stream(loaded.preprocessing, InputSpec(text=text, batch_size=2))
    batches = list(made)
    assert [b.names for b in batches] == [["line 1"], ["line 3"], ["line 5"]]
    assert made.count == 3 and made.tokenless.count == 2
    assert made.tokenless.names == ["line 2", "line 4"]
    assert any("2 sample(s)" in n and "no token" in n and "line 2" in n for n in made.notes())
    tok = loaded.preprocessing.tokenizer
    for batch, line in zip(batches, GOOD, strict=True):
        assert batch.inputs["input_ids"].tolist() == tok([line])["input_ids"]
    # a batch that keeps two rows keeps their padding: the kept rows as the tokenizer pads them together
    text.write_text(f"{GOOD[1]}\n{ZW}\n{GOOD[2]}\n", encoding="utf-8")
    (batch,) = list(stream(loaded.preprocessing, InputSpec(text=text, batch_size=3)))
    together = tok([GOOD[1], GOOD[2]], padding=True, return_tensors="pt")
    assert torch.equal(batch.inputs["input_ids"], together["input_ids"])
    assert torch.equal(batch.inputs["attention_mask"], together["attention_mask"])
    assert batch.lengths is not None and batch.lengths.tolist() == [5, 1]


def test_the_report_counts_the_skipped_sample(
    model: Path, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    text = tmp_path / "mixed.txt"
    text.write_text(f"{GOOD[1]}\n{ZW}\n", encoding="utf-8")
    result = cli("spectrum", str(model), "--text", str(text), "--no-conditioned", "--json")
    assert result.exit_code == 0, result.output
    inputs = json.loads(result.stdout)["inputs"]
    assert (inputs["count"], inputs["skipped"], inputs["tokens"]) == (1, 1, 5)
    assert "skipped: the model's tokenizer gives them no token (line 2" in result.stderr


def test_only_tokenless_lines_are_refused_in_one_line(
    model: Path, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    text = tmp_path / "nothing.txt"
    text.write_text(f"{ZW}\n{ZW}{ZW}\n", encoding="utf-8")
    result = cli("spectrum", str(model), "--text", str(text))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no usable input" in lines[0] and "gives no token" in lines[0], lines
    assert "Traceback" not in result.output


def test_texts_given_to_the_api_are_skipped_the_same_way(model: Path) -> None:
    from condcli import api

    report = api.spectrum(str(model), inputs=[GOOD[0], ZW], conditioned=False)
    assert (report.inputs.count, report.inputs.skipped) == (1, 1)
