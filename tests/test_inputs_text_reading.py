"""``text``: lines read in bounded chunks (issue 17, items 3 and 20): memory never holds a whole line, a cut
line tokenizes as the whole line truncated by the tokenizer itself, what was truncated is said, and
standard input, folders and encodings each get their own behaviour or message."""

from __future__ import annotations

import io
import os
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import torch

import condcli.inputs.reading as reading
from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, Preprocessing, stream
from condcli.inputs.preprocessing import hf_text_preprocessing

BERT = Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / "bert-docstrings"


class CountingTokenizer:
    """A stand-in tokenizer: one token per character, remembering the longest text it was given."""

    def __init__(self) -> None:
        self.longest = 0

    def __call__(self, texts: list[str], max_length: int, **_: Any) -> dict[str, torch.Tensor]:
        self.longest = max([self.longest, *(len(t) for t in texts)])
        n = min(max(len(t) for t in texts), max_length)
        mask = torch.tensor([[1] * min(len(t), n) + [0] * (n - min(len(t), n)) for t in texts])
        return {"input_ids": mask.clone(), "attention_mask": mask}


@pytest.fixture(scope="module")
def bert() -> Preprocessing:
    from transformers import AutoConfig

    return hf_text_preprocessing(BERT, AutoConfig.from_pretrained(BERT))


def _lines(data: bytes, chunk: int, keep: int = 1 << 20) -> list[str]:
    old = reading.CHUNK
    reading.CHUNK = chunk
    try:
        return [raw.decode() for raw, _ in reading.raw_lines(io.BytesIO(data).read, keep, "t")]
    finally:
        reading.CHUNK = old


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 16])
def test_lines_end_where_text_mode_ends_them(chunk: int) -> None:
    """Universal newlines, as Python's text mode reads them (the reference), whatever the chunk size."""
    import random

    rng = random.Random(chunk)
    pieces = ["a", "bc", "é", " ", "\r", "\n", "\r\n", "\n\n", "\r\r"]
    for _ in range(30):
        data = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))).encode()
        expected = [
            line.removesuffix("\n") for line in io.TextIOWrapper(io.BytesIO(data), "utf-8").readlines()
        ]
        assert _lines(data, chunk) == expected, data


def test_a_long_line_is_never_held_whole(tmp_path: Path) -> None:
    """A 40 MB line: Python allocations stay within a chunk and the kept bytes (the old reader read the line
    whole), and the tokenizer is handed only what the model's 16 tokens can use."""
    big = tmp_path / "big.txt"
    with big.open("wb") as fh:
        for _ in range(40):
            fh.write(b"word " * (1 << 18) + b"  ")
        fh.write(b"\nsecond line\n")
    tok = CountingTokenizer()
    pre = Preprocessing("text", "t", tokenizer=tok, max_length=16)
    tracemalloc.start()
    try:
        inputs = stream(pre, InputSpec(text=big, batch_size=1))
        names = [n for b in inputs for n in b.names]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert names == ["line 1", "line 2"]
    assert peak < 4 << 20, peak
    assert tok.longest <= reading.byte_bound(16) == 16 * reading.BYTES_PER_TOKEN
    assert inputs.truncation is not None and inputs.truncation.lines.cut == 1
    (note,) = inputs.notes()
    assert "1 line(s) of" in note and "16 tokens" in note and f"up to {reading.byte_bound(16)} bytes" in note


@pytest.mark.parametrize("unit", ["word ", "é ", "中文 ", "🙂x "])
def test_a_cut_line_gives_the_tokens_of_the_whole_line(
    bert: Preprocessing, tmp_path: Path, unit: str
) -> None:
    """The model's own tokenizer on the whole line, truncated to 128 tokens, is the reference: cutting the
    line while reading (also inside a multibyte character) changes none of the tokens the model reads."""
    line = unit * (3 * reading.byte_bound(bert.max_length) // len(unit.encode()) + 1)
    file = tmp_path / "t.txt"
    file.write_text("short line\n" + line + "\n", encoding="utf-8")
    inputs = stream(bert, InputSpec(text=file, batch_size=2))
    (batch,) = list(inputs)
    ref = bert.tokenizer(line, truncation=True, max_length=bert.max_length)["input_ids"]
    assert len(ref) == bert.max_length
    assert batch.inputs["input_ids"][1].tolist() == ref
    assert batch.lengths is not None and batch.lengths.tolist()[1] == bert.max_length
    assert inputs.truncation is not None
    assert (inputs.truncation.truncated, inputs.truncation.lines.cut) == (1, 1)


def test_the_note_counts_the_lines_longer_than_the_model_reads(bert: Preprocessing, tmp_path: Path) -> None:
    lines = ["a b c", "word " * 126, "word " * 127, "word " * 400, "tiny"]
    file = tmp_path / "t.txt"
    file.write_text("\n".join(lines) + "\n")
    inputs = stream(bert, InputSpec(text=file, batch_size=3))
    list(inputs)
    longer = sum(len(bert.tokenizer(t)["input_ids"]) > bert.max_length for t in lines)  # the reference
    assert longer == 2
    said = f"{longer} line(s) of {file} longer than the model's 128 tokens were truncated to their first 128"
    assert inputs.notes() == [f"{said} tokens"]
    short = tmp_path / "s.txt"
    short.write_text("a b c\n")
    inputs = stream(bert, InputSpec(text=short))
    list(inputs)
    assert inputs.notes() == []


def test_standard_input_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = CountingTokenizer()
    pre = Preprocessing("text", "t", tokenizer=tok, max_length=16)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"one\n\ntwo\r\nthree")))
    inputs = stream(pre, InputSpec(text=Path("-"), batch_size=2))
    assert inputs.description == "lines of standard input"
    assert [n for b in inputs for n in b.names] == ["line 1", "line 3", "line 4"]
    with pytest.raises(InputError, match="standard input can be read only once"):
        list(inputs)
    with pytest.raises(InputError, match="standard input can be read only once"):  # e.g. compare's model B
        list(stream(pre, InputSpec(text=Path("-"))))


def test_a_pipe_is_read_as_it_arrives(tmp_path: Path) -> None:
    """``max_samples`` lines from a pipe whose writer is still open: no waiting for more (or for its end)."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"first\nsecond\n")
    pre = Preprocessing("text", "t", tokenizer=CountingTokenizer(), max_length=16)
    got: list[str] = []

    def draw() -> None:
        got.extend(
            n
            for b in stream(pre, InputSpec(text=Path(f"/dev/fd/{read_end}"), max_samples=2))
            for n in b.names
        )

    worker = threading.Thread(target=draw, daemon=True)
    worker.start()
    worker.join(timeout=30)
    os.close(write_end)
    os.close(read_end)
    assert not worker.is_alive() and got == ["line 1", "line 2"]


def test_paths_that_are_not_text_files_say_what_they_are(tmp_path: Path) -> None:
    pre = Preprocessing("text", "t", tokenizer=CountingTokenizer(), max_length=16)
    with pytest.raises(InputError, match="is a folder, not a file"):
        stream(pre, InputSpec(text=tmp_path))
    with pytest.raises(InputError, match="no such file"):
        stream(pre, InputSpec(text=tmp_path / "missing.txt"))
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(InputError, match="cannot be read"):
        stream(pre, InputSpec(text=tmp_path / "loop"))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"fine\ncaf\xe9\n", "line 2 of .* is not UTF-8 text \\(byte 0xe9 at byte 4"),
        (b"one\ntw\x00o\n", "line 2 of .* contains a NUL byte"),
        ("hello\n".encode("utf-16"), "is UTF-16 text, not UTF-8"),
        ("hello\n".encode("utf-16-le"), "line 1 of .* contains a NUL byte"),
        (b"", "no non-blank line"),
        (b"\n \r\n\t\r", "no non-blank line"),
    ],
)
def test_text_that_is_not_usable_is_one_error(tmp_path: Path, data: bytes, says: str) -> None:
    file = tmp_path / "t.txt"
    file.write_bytes(data)
    pre = Preprocessing("text", "t", tokenizer=CountingTokenizer(), max_length=16)
    with pytest.raises(InputError, match=says):
        list(stream(pre, InputSpec(text=file)))


def test_a_utf8_byte_order_mark_is_not_text(bert: Preprocessing, tmp_path: Path) -> None:
    with_bom, plain = tmp_path / "bom.txt", tmp_path / "plain.txt"
    with_bom.write_bytes(b"\xef\xbb\xbfThe first line.\nThe second.\n")
    plain.write_bytes(b"The first line.\nThe second.\n")
    a, b = (next(iter(stream(bert, InputSpec(text=f)))) for f in (with_bom, plain))
    assert torch.equal(a.inputs["input_ids"], b.inputs["input_ids"])
