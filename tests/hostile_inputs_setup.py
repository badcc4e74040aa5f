"""Builders of the files the hostile input cases (tests/hostile_cases_inputs.py) work on: tiny model
folders (a random-init BERT with a WordPiece tokenizer, an HF ViT), huge single-line texts, image folders
of every kind. Each returns a setup taking the case's folder, so nothing is built until a case runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz", "hello", "world", "##s"]
MB = 1 << 20


def tiny_bert(tmp: Path, tokenizer: bool = True) -> Path:
    """A random-init BERT (d 16, one layer) saved in tmp/m, with a WordPiece tokenizer (tokenizer.json,
    tokenizer_config.json) unless ``tokenizer`` is False."""
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp / "m"
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    BertModel(config).save_pretrained(folder)
    if tokenizer:
        vocab = tmp / "vocab-source.txt"
        vocab.write_text("\n".join(VOCAB) + "\n")
        BertTokenizer(str(vocab)).save_pretrained(folder)
        vocab.unlink()
    return folder


def bert_with(
    files: dict[str, bytes], tokenizer: bool = True, text: str | None = None
) -> Callable[[Path], None]:
    """A setup: :func:`tiny_bert`, then ``files`` (name → bytes) written into its folder (b"" removes one),
    and ``text`` in tmp/t.txt."""

    def make(tmp: Path) -> None:
        folder = tiny_bert(tmp, tokenizer)
        for name, data in files.items():
            if data:
                (folder / name).write_bytes(data)
            else:
                (folder / name).unlink()
        if text is not None:
            (tmp / "t.txt").write_text(text)

    return make


def hf_vit_with(preprocessor: str) -> Callable[[Path], None]:
    """A setup: a random-init HF ViT (32×32 px, d 16, one layer) in tmp/v, its preprocessor_config.json
    holding ``preprocessor``."""

    def make(tmp: Path) -> None:
        from transformers import ViTConfig, ViTModel

        config = ViTConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, image_size=32
        )
        ViTModel(config).save_pretrained(tmp / "v")
        (tmp / "v" / "preprocessor_config.json").write_text(preprocessor)

    return make


def one_line(size: int, name: str = "big.txt") -> Callable[[Path], None]:
    """A setup: one line of ``size`` bytes of words (no newline), written in 1 MiB pieces."""

    def make(tmp: Path) -> None:
        piece = (b"lorem ipsum dolor sit amet " * (MB // 27 + 1))[:MB]
        with (tmp / name).open("wb") as fh:
            for _ in range(size // MB):
                fh.write(piece)

    return make


def image(path: Path, size: tuple[int, int] = (40, 40), mode: str = "RGB") -> None:
    from PIL import Image

    rng = np.random.default_rng(abs(hash(path.name)) % 1000)
    pixels = (rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).convert(mode).save(path)


def huge_png(path: Path) -> None:
    """A 12000×12000 grey PNG (144 megapixels; 0.1 MB on disk, 144 MB once decoded)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (12000, 12000), 128).save(path, compress_level=1)


def images(**what: str) -> Callable[[Path], None]:
    """A setup: a folder tmp/imgs holding ``name=kind`` entries: "rgb", "cmyk", "1", "gif" (animated),
    "i16" (16-bit grey), "huge", "truncated", "text", "loop" (a symlink loop), "dangling", "newline" (a
    file named bad<newline>name.png)."""

    def make(tmp: Path) -> None:
        from PIL import Image

        folder = tmp / "imgs"
        folder.mkdir()
        for stem, kind in what.items():
            name = stem.replace("_", ".")
            path = folder / name
            if kind == "huge":
                huge_png(path)
            elif kind in ("rgb", "cmyk", "1"):
                image(path, mode={"rgb": "RGB", "cmyk": "CMYK", "1": "1"}[kind])
            elif kind == "gif":
                frames = [Image.new("RGB", (40, 40), (40 * i, 0, 0)) for i in range(3)]
                frames[0].save(path, save_all=True, append_images=frames[1:])
            elif kind == "i16":
                Image.fromarray((np.arange(1600).reshape(40, 40) * 40).astype(np.uint16)).save(path)
            elif kind == "truncated":
                image(tmp / "whole.png")
                path.write_bytes((tmp / "whole.png").read_bytes()[:300])
                (tmp / "whole.png").unlink()
            elif kind == "text":
                path.write_text("not an image\n")
            elif kind == "loop":
                os.symlink(f"{name}-2", path)
                os.symlink(name, folder / f"{name}-2")
            elif kind == "dangling":
                os.symlink("nowhere", path)
            elif kind == "newline":
                (folder / "bad\nname.png").write_text("not an image")

    return make


def text(content: bytes, name: str = "t.txt") -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / name).write_bytes(content)

    return make
