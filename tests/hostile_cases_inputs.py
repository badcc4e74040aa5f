"""Hostile-input cases: inputs (run by tests/test_hostile.py through tests/hostile_harness.py).

What condcli reads: ``--text`` is read line by line in bounded chunks (a 200 MB line costs no memory and is
truncated to what the model reads, with a note), from a file, ``-`` or ``/dev/stdin``; random token ids
are drawn batch by batch; ``--images`` skips what is not a readable image (a 144-megapixel PNG, a truncated
file, a broken symlink) and names it; tokenizer files that are present but broken are an error naming
them, never taken for no tokenizer (nor a broken preprocessor_config.json for none). The model folders are
built by tests/hostile_inputs_setup.py (a random-init BERT with a WordPiece tokenizer from a 35-word
vocabulary, an HF ViT), so no case needs the network.
"""

from __future__ import annotations

from pathlib import Path

from tests.hostile_harness import Hostile
from tests.hostile_inputs_setup import MB, bert_with, hf_vit_with, images, one_line, text

BERT = "bert-docstrings"  # shipped sample: a fast tokenizer, 128 tokens
VIT = "vit-plain"  # shipped sample: 32×32 images
FAST = ("--layers", "none", "--batch-size", "2")
LONG_LINE = b"hello world " * 1000  # 12000 bytes: far more than bert-docstrings' 128 tokens

CASES: list[Hostile] = [
    # 3. a 200 MB line: read in chunks, truncated to the model's 128 tokens, said so (was 24 GB, killed)
    Hostile(
        "in-text-200mb-line",
        ("spectrum", BERT, "--text", "big.txt", "--max-samples", "3", *FAST),
        0,
        "truncated to their first 128 tokens",
        one_line(200 * MB),
        memory_gib=6,
    ),
    Hostile(
        "in-text-long-line-note",
        ("spectrum", BERT, "--text", "t.txt", *FAST),
        0,
        "1 line(s) of t.txt longer than the model's 128 tokens",
        text(b"short\n" + LONG_LINE + b"\n"),
    ),
    # 5. random token ids streamed: 30M samples ask for nothing up front (was 15 GB, exit 3)
    Hostile(
        "in-random-tokens-30m",
        ("inspect", "m", "--max-samples", "30000000"),
        0,
        "",
        bert_with({}, tokenizer=False),
        memory_gib=6,
    ),
    Hostile(
        "in-random-tokens-huge-batch",
        ("spectrum", "m", "--max-samples", "30000000", "--batch-size", "30000000", "--layers", "none"),
        2,
        "does not fit in memory",
        bert_with({}, tokenizer=False),
        memory_gib=6,
    ),
    # 9. tokenizer files present but broken: exit 2 naming the file, never random token ids
    Hostile(
        "in-tokenizer-json-garbage",
        ("spectrum", "m", "--max-samples", "2", *FAST),
        2,
        "tokenizer.json: invalid JSON",
        bert_with({"tokenizer.json": b"garbage{"}),
    ),
    Hostile(
        "in-tokenizer-json-garbage-text",
        ("spectrum", "m", "--text", "t.txt", *FAST),
        2,
        "tokenizer.json: invalid JSON",
        bert_with({"tokenizer.json": b"garbage{"}, text="hello world\n"),
    ),
    Hostile(
        "in-tokenizer-json-empty-object",
        ("spectrum", "m", *FAST),
        2,
        "tokenizer.json is not a tokenizer",
        bert_with({"tokenizer.json": b"{}"}),
    ),
    Hostile(
        "in-tokenizer-config-garbage",
        ("spectrum", "m", *FAST),
        2,
        "tokenizer_config.json: invalid JSON",
        bert_with({"tokenizer_config.json": b"\x00\x01"}),
    ),
    Hostile(
        "in-vocab-txt-binary",
        ("spectrum", "m", *FAST),
        2,
        "vocab.txt: it is not UTF-8",
        bert_with({"tokenizer.json": b"", "tokenizer_config.json": b"", "vocab.txt": b"\xff\xfe\x00\x81"}),
    ),
    Hostile(
        "in-vocab-txt-no-unk",
        ("spectrum", "m", *FAST),
        2,
        "cannot encode text",
        bert_with({"tokenizer.json": b"", "tokenizer_config.json": b"", "vocab.txt": b"hello\nworld\n"}),
    ),
    Hostile(
        "in-tokenizer-foreign",
        ("spectrum", "m", *FAST),
        2,
        "do not belong to this model",
        bert_with(
            {
                name: (
                    Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / BERT / name
                ).read_bytes()
                for name in ("tokenizer.json", "tokenizer_config.json")
            }
        ),
    ),
    Hostile(
        "in-tokenizer-max-length-negative",
        ("spectrum", "m", *FAST),
        2,
        "gives its maximum length as -5",
        bert_with({"tokenizer_config.json": b'{"tokenizer_class": "BertTokenizer", "model_max_length": -5}'}),
    ),
    Hostile(
        "in-no-tokenizer-text",
        ("spectrum", "m", "--text", "t.txt", *FAST),
        2,
        "has no tokenizer",
        bert_with({}, tokenizer=False, text="hello\n"),
    ),
    # the same for an image processor: present but broken is an error, not "the model has no preprocessor"
    Hostile(
        "in-image-processor-garbage",
        ("spectrum", "v", *FAST),
        2,
        "the image processor in v cannot be loaded (preprocessor_config.json: invalid JSON",
        hf_vit_with("garbage"),
    ),
    Hostile(
        "in-image-processor-negative-size",
        ("spectrum", "v", *FAST),
        2,
        "loads but cannot preprocess an image",
        hf_vit_with('{"image_processor_type": "ViTImageProcessor", "size": {"height": -3, "width": 0}}'),
    ),
    # 17. a 144-megapixel PNG is skipped from its header, named, with no Pillow warning; truncated images
    Hostile(
        "in-image-144mp",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        0,
        "12000×12000 px: 144 megapixels, above the 89.5 megapixels limit",
        images(a_png="rgb", big_png="huge"),
        memory_gib=6,
    ),
    Hostile(
        "in-image-144mp-alone",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        2,
        "big.png (12000×12000 px",
        images(big_png="huge"),
        memory_gib=6,
    ),
    Hostile(
        "in-image-truncated",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        0,
        "cut.png (unreadable: image file is truncated)",
        images(a_png="rgb", cut_png="truncated"),
    ),
    Hostile(
        "in-image-modes",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        0,
        "1 file(s) in imgs skipped: notes.txt (not an image)",
        images(c_jpg="cmyk", b_png="1", g_gif="gif", d_png="i16", e_png="rgb", notes_txt="text"),
    ),
    Hostile(
        "in-images-symlink-loop",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        0,
        "loop (a broken symbolic link)",
        images(a_png="rgb", loop="loop", x_png="dangling"),
    ),
    Hostile(
        "in-images-newline-name",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        2,
        "bad\\nname.png (not an image)",
        images(x="newline"),
    ),
    Hostile("in-images-empty", ("spectrum", VIT, "--images", "imgs", *FAST), 2, "no usable input", images()),
    Hostile(
        "in-images-only-text",
        ("spectrum", VIT, "--images", "imgs", *FAST),
        2,
        "notes.txt (not an image)",
        images(notes_txt="text"),
    ),
    # 20. a file as --images, a folder as --text, stdin as --text
    Hostile(
        "in-images-is-file",
        ("spectrum", VIT, "--images", "t.txt", *FAST),
        2,
        "--images t.txt is a file, not a folder",
        text(b"x\n"),
    ),
    Hostile("in-images-missing", ("spectrum", VIT, "--images", "nope", *FAST), 2, "no such folder"),
    Hostile(
        "in-text-folder", ("spectrum", BERT, "--text", ".", *FAST), 2, "--text . is a folder, not a file"
    ),
    Hostile("in-text-missing", ("spectrum", BERT, "--text", "nope.txt", *FAST), 2, "no such file"),
    Hostile(
        "in-text-stdin-dash",
        ("spectrum", BERT, "--text", "-", *FAST),
        0,
        "1 line(s) of standard input longer than the model's 128 tokens",
        stdin=b"hello there\n" + LONG_LINE + b"\n",
    ),
    Hostile(
        "in-text-dev-stdin",
        ("spectrum", BERT, "--text", "/dev/stdin", *FAST),
        0,
        "1 line(s) of /dev/stdin longer than the model's 128 tokens",
        stdin=LONG_LINE + b"\nhello there\n",
    ),
    Hostile(
        "in-compare-stdin-twice",
        ("compare", BERT, "gpt2-docstrings", "--text", "-", *FAST),
        2,
        "standard input can be read only once",
        stdin=b"hello there\n",
    ),
    Hostile(
        "in-text-stdin-empty",
        ("spectrum", BERT, "--text", "-", *FAST),
        2,
        "no non-blank line",
        stdin=b"\n \n",
    ),
    # more text: empty, blank, not UTF-8, NUL bytes, UTF-16, an endless device
    Hostile("in-text-empty", ("spectrum", BERT, "--text", "t.txt", *FAST), 2, "no non-blank line", text(b"")),
    Hostile(
        "in-text-blank-lines",
        ("spectrum", BERT, "--text", "t.txt", *FAST),
        2,
        "no non-blank line",
        text(b"\n   \n\t\r\n\r"),
    ),
    Hostile(
        "in-text-not-utf8",
        ("spectrum", BERT, "--text", "t.txt", *FAST),
        2,
        "line 2 of t.txt is not UTF-8 text (byte 0xe9",
        text(b"fine\ncaf\xe9 latin-1\n"),
    ),
    Hostile(
        "in-text-nul-byte",
        ("spectrum", BERT, "--text", "t.txt", *FAST),
        2,
        "line 3 of t.txt contains a NUL byte",
        text(b"one\ntwo\nthr\x00ee\n"),
    ),
    Hostile(
        "in-text-utf16",
        ("spectrum", BERT, "--text", "t.txt", *FAST),
        2,
        "t.txt is UTF-16 text",
        text("hello\nworld\n".encode("utf-16")),
    ),
    Hostile(
        "in-text-dev-zero",
        ("spectrum", BERT, "--text", "/dev/zero", *FAST),
        2,
        "contains a NUL byte",
        timeout_s=120,
    ),
    # absurd sizes: nothing allocated up front, usage errors named by flag
    Hostile(
        "in-max-samples-0", ("spectrum", BERT, "--max-samples", "0"), 2, "--max-samples must be at least 1"
    ),
    Hostile(
        "in-max-samples-neg", ("spectrum", BERT, "--max-samples", "-5"), 2, "--max-samples must be at least 1"
    ),
    Hostile("in-batch-size-0", ("spectrum", BERT, "--batch-size", "0"), 2, "--batch-size must be at least 1"),
    Hostile(
        "in-batch-size-huge",
        ("spectrum", BERT, "--batch-size", "1" + "0" * 30, "--max-samples", "3", "--layers", "none"),
        0,
        "",
        memory_gib=6,
    ),
]
