"""Tokenizer files of a model folder (issue 17, item 9): no tokenizer files → random token ids, said so;
tokenizer files that are there but broken → one InputError naming the broken file, never random ids; a
tokenizer from another model (ids beyond the model's vocabulary) → one InputError, not an IndexError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, stream
from condcli.inputs.preprocessing import hf_text_preprocessing
from tests.hostile_inputs_setup import VOCAB, tiny_bert

BERT = Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / "bert-docstrings"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("bert"))


def _folder(built: Path, tmp_path: Path, files: dict[str, bytes | None]) -> Path:
    """A copy of the tiny BERT folder with ``files`` written (None: removed)."""
    folder = tmp_path / "m"
    folder.mkdir()
    for path in built.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    for name, data in files.items():
        if data is None:
            (folder / name).unlink()
        else:
            (folder / name).write_bytes(data)
    return folder


def _config(folder: Path):  # type: ignore[no-untyped-def]
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder)


def test_an_intact_tokenizer_is_the_models_own(built: Path) -> None:
    from transformers import AutoTokenizer

    pre = hf_text_preprocessing(built, _config(built))
    reference = AutoTokenizer.from_pretrained(str(built))
    assert pre.tokenizer is not None
    assert pre.tokenizer("hello worlds")["input_ids"] == reference("hello worlds")["input_ids"]


def test_no_tokenizer_files_means_random_token_ids(built: Path, tmp_path: Path) -> None:
    folder = _folder(built, tmp_path, {"tokenizer.json": None, "tokenizer_config.json": None})
    pre = hf_text_preprocessing(folder, _config(folder))
    assert pre.tokenizer is None and pre.vocab_size == len(VOCAB)
    inputs = stream(pre, InputSpec(max_samples=2))
    assert "the model has no tokenizer" in inputs.description


NO_FAST = {"tokenizer.json": None, "tokenizer_config.json": None}


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"tokenizer.json": b"garbage{"}, "(tokenizer.json: invalid JSON at line 1, column 1"),
        ({"tokenizer.json": b""}, "(tokenizer.json: invalid JSON"),
        ({"tokenizer.json": b"{}"}, "(tokenizer.json is not a tokenizer: "),
        ({"tokenizer.json": b"[1, 2]"}, "(tokenizer.json is not a tokenizer: "),
        ({"tokenizer_config.json": b"\xff\xfe"}, "(tokenizer_config.json: it is not UTF-8 text"),
        ({**NO_FAST, "vocab.txt": b"\xff\x00\x81"}, "(vocab.txt: it is not UTF-8 text"),
        ({**NO_FAST, "vocab.txt": b"hello\nworld\n"}, "(vocab.txt) load but cannot encode text (WordPiece"),
    ],
)
def test_broken_tokenizer_files_are_one_error_naming_the_file(
    built: Path, tmp_path: Path, files: dict[str, bytes | None], says: str
) -> None:
    folder = _folder(built, tmp_path, files)
    with pytest.raises(InputError) as e:
        hf_text_preprocessing(folder, _config(folder))
    assert says in e.value.message and str(folder) in e.value.message
    assert "remove them to analyse random token ids" in (e.value.hint or "")


def test_a_tokenizer_of_another_model_is_one_error(built: Path, tmp_path: Path) -> None:
    """bert-docstrings' tokenizer (4096 ids) beside a model with 35: the first batch says so."""
    foreign = {n: (BERT / n).read_bytes() for n in ("tokenizer.json", "tokenizer_config.json")}
    folder = _folder(built, tmp_path, dict(foreign))
    pre = hf_text_preprocessing(folder, _config(folder))
    with pytest.raises(InputError, match=f"the model's vocabulary has {len(VOCAB)} entries"):
        list(stream(pre, InputSpec(max_samples=4)))


@pytest.mark.parametrize("value", [-5, 0])
def test_a_maximum_length_that_is_no_length_is_one_error(built: Path, tmp_path: Path, value: int) -> None:
    """model_max_length -5 overflowed inside the tokenizer (exit 3); 0 turned truncation off."""
    config = json.loads((built / "tokenizer_config.json").read_text())
    folder = _folder(
        built, tmp_path, {"tokenizer_config.json": json.dumps({**config, "model_max_length": value}).encode()}
    )
    with pytest.raises(InputError, match=f"gives its maximum length as {value}, not a positive number"):
        hf_text_preprocessing(folder, _config(folder))
