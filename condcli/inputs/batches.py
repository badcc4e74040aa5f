"""Inputs → streamed batches, through the model's own preprocessing (timm transforms, HF tokenizer).

Sources of samples: a folder of ``images``, a ``text`` file (one sample per line), or a labelled deterministic
default: synthetic images with 1/f (natural-image-like) spectra, a short built-in English text set, random
token ids for a model without a tokenizer, or synthetic audio or video clips for an audio or video model
(:mod:`condcli.inputs.audio`, :mod:`condcli.inputs.video`), through the model's own feature extractor or video
processor; every tensor a processor makes that the model reads is fed, not only the first. Batches are
produced lazily, so memory does not grow with the number of inputs, nor with the length of a text line
(:mod:`condcli.inputs.reading`). Unreadable or non-image files are skipped and counted
(:mod:`condcli.inputs.images`); what a reader of the results should know about the inputs (files skipped,
lines truncated) is in :meth:`InputStream.notes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from condcli.errors import InputError, UsageError
from condcli.inputs.images import Skipped, folder_images, padded_lengths
from condcli.inputs.reading import LineCount, TextSource, byte_bound, text_lines, text_source
from condcli.inputs.text import DEFAULT_TEXTS

InputKind = Literal["images", "text", "synthetic", "audio", "video"]
DEFAULT_SYNTHETIC_SAMPLES = 16
RANDOM_TOKENS_LENGTH = 64


@dataclass
class Batch:
    """One batch, ready for the model: ``inputs`` are its keyword arguments."""

    inputs: dict[str, torch.Tensor]
    lengths: torch.Tensor | None  # (B,) real tokens per sample (padding excluded); None: no padding
    names: list[str]  # what each sample is (file name, line number, "synthetic #3")

    @property
    def size(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class Synthetic:
    """Samples condcli makes itself for a model that reads audio or video (no files are read for these)."""

    kind: Literal["audio", "video"]
    make: Callable[[int, int, int], dict[str, torch.Tensor]]  # (seed, start, count) → the model's inputs
    describe: Callable[[int, int], str]  # (count, seed) → what the samples are, for the report


@dataclass
class Preprocessing:
    """How a model wants its inputs; built by :mod:`condcli.loading.sources` from the model's own config."""

    modality: Literal["images", "text", "audio", "video"]
    describe: str  # e.g. "timm transforms: resize 248, center crop 224, mean/std ImageNet"
    image_transform: Callable[[Any], torch.Tensor] | None = None  # PIL image → (3, H, W)
    image_size: tuple[int, int] = (224, 224)
    tokenizer: Any = None  # a Hugging Face tokenizer, or None → random token ids
    max_length: int = 512
    pad_to: int | None = None  # the model needs every sequence this long (Nyströmformer)
    vocab_size: int = 0
    # PIL images → every tensor the model's image processor makes that it reads (None: ``image_transform``
    # per image, stacked as pixel_values)
    image_batch: Callable[[list[Any]], dict[str, torch.Tensor]] | None = None
    synthetic: Synthetic | None = None  # audio / video: the clips condcli makes and feeds
    feeds: tuple[str, ...] = ()  # the keyword arguments a batch carries (empty: not known in advance)
    # the most samples one forward takes, whatever ``batch_size`` asks (None: no limit): a model that packs
    # a forward's images into one sequence (MiniCPM's vision tower, split by ``target_sizes``) reads one at a
    # time
    per_forward: int | None = None
    # more inputs, made for each text batch from its own (inputs, seed, index of its first sample): the token
    # ids of a second encoder the forward reads beside the text (Evolla's protein_input_ids)
    beside: Callable[[dict[str, torch.Tensor], int, int], dict[str, torch.Tensor]] | None = None


@dataclass
class InputSpec:
    """What the user asked for (CLI options)."""

    images: Path | None = None
    text: Path | None = None
    max_samples: int | None = None
    batch_size: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if self.images is not None and self.text is not None:
            raise UsageError("`images` and `text` were both given", "analyse one kind of input per run")
        if self.batch_size < 1:
            raise UsageError(f"`batch_size` must be at least 1, got {self.batch_size}", "e.g. `batch_size=8`")
        if self.max_samples is not None and self.max_samples < 1:
            raise UsageError(
                f"`max_samples` must be at least 1, got {self.max_samples}", "e.g. `max_samples=32`"
            )


@dataclass
class Truncation:
    """Text samples longer than the model reads: cut while reading (bytes) and by the tokenizer (tokens)."""

    source: str  # the file, as the user named it
    tokens: int  # the model's maximum length in tokens
    keep: int  # bytes of a line read at most
    lines: LineCount = field(default_factory=LineCount)  # lines cut while reading
    truncated: int = 0  # samples with more tokens than ``tokens`` (exact for a fast tokenizer)
    exact: bool = True  # False: a slow tokenizer, ``truncated`` counts the samples that fill ``tokens``

    def note(self) -> str | None:
        """One sentence, or None when nothing was truncated."""
        n, cut = self.truncated, self.lines.cut
        read = f"each line is read up to {self.keep} bytes, the rest skipped unread"
        if n:
            what = "longer than" if self.exact else "as long as or longer than"
            return (
                f"{n} line(s) of {self.source} {what} the model's {self.tokens} tokens were truncated to"
                f" their first {self.tokens} tokens" + (f" ({read})" if cut else "")
            )
        if cut:
            return f"{cut} line(s) of {self.source} are longer than {self.keep} bytes: {read}"
        return None


@dataclass
class InputStream:
    """An iterable of batches plus what they are; ``count``/``skipped`` fill in as batches are drawn."""

    kind: InputKind
    description: str  # labelled in the report, e.g. "16 synthetic 1/f images (seed 0)"
    make: Callable[[InputStream], Iterator[Batch]]
    expected: int | None = None  # samples the stream will give, where known in advance (progress bars)
    where: str = ""  # the folder of ``images``, named in notes
    count: int = 0
    files: Skipped = field(default_factory=Skipped)  # files skipped (not images, unreadable)
    truncation: Truncation | None = None  # text: lines longer than the model reads
    tokenless: Skipped = field(default_factory=Skipped)  # text: samples the tokenizer maps to no token

    @property
    def skipped(self) -> int:
        """Files skipped as unreadable or not images."""
        return self.files.count

    @property
    def skipped_examples(self) -> list[str]:
        """The first few skipped files."""
        return self.files.names

    def __iter__(self) -> Iterator[Batch]:
        self.count = 0
        self.files = Skipped()
        self.tokenless = Skipped()
        produced = False
        for batch in self.make(self):
            produced = True
            self.count += batch.size
            yield batch
        if not produced:
            raise InputError(f"no usable input in {self.description}", self._no_input_hint())

    def notes(self) -> list[str]:
        """What a reader of the results should know about the inputs: files skipped, lines truncated."""
        notes = []
        if self.files.count:
            notes.append(f"{self.files.count} file(s) in {self.where} skipped: {self.files.examples()}")
        if self.tokenless.count:
            notes.append(
                f"{self.tokenless.count} sample(s) of {self.description} skipped: the model's tokenizer gives"
                f" them no token ({self.tokenless.examples()})"
            )
        note = self.truncation.note() if self.truncation is not None else None
        return notes + ([note] if note else [])

    def _no_input_hint(self) -> str:
        if self.skipped:
            return f"{self.skipped} file(s) skipped: {self.files.examples()}"
        if self.tokenless.count:
            return (
                f"the model's tokenizer gives no token for any of them ({self.tokenless.examples()}); give"
                " text it encodes"
            )
        if self.kind == "text":
            return "the text holds no non-blank line; give a UTF-8 file with one sample per line (`text`)"
        return "give a folder with images (`images`) or a file with one text per line (`text`)"


def synthetic_image(index: int, seed: int, size: tuple[int, int]) -> np.ndarray:
    """A deterministic RGB uint8 image whose power spectrum falls like 1/f² (natural-image statistics)."""
    h, w = size
    rng = np.random.default_rng([seed, index])
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx**2 + fy**2)
    f[0, 0] = 1.0 / max(h, w)
    channels = []
    shared = rng.standard_normal((h, w))  # luminance shared by all channels: colours correlate
    for _ in range(3):
        field_ = np.fft.irfft2(np.fft.rfft2(0.7 * shared + 0.3 * rng.standard_normal((h, w))) / f, s=(h, w))
        channels.append(field_)
    img = np.stack(channels, axis=-1)
    img = (img - img.min()) / (img.max() - img.min() + 1e-12)
    return np.asarray(np.round(img * 255), dtype=np.uint8)


def _image_batches(pre: Preprocessing, spec: InputSpec, paths: Iterator[tuple[str, Any]]) -> Iterator[Batch]:
    """Group (name, PIL image) pairs into batches of preprocessed pixels (and whatever else the model's
    processor makes for them, where it makes more)."""
    assert pre.image_transform is not None or pre.image_batch is not None
    names: list[str] = []
    pixels: list[Any] = []  # transformed pixels, or the images themselves for ``image_batch``

    def done() -> Batch:
        if pre.image_batch is not None:
            made = pre.image_batch(pixels)
            return Batch(made, padded_lengths(made), names)
        return Batch({"pixel_values": torch.stack(pixels)}, None, names)

    size = min(spec.batch_size, pre.per_forward or spec.batch_size)
    for name, image in paths:
        pixels.append(
            image
            if pre.image_batch is not None or pre.image_transform is None
            else pre.image_transform(image)
        )
        names.append(name)
        if len(names) == size:
            yield done()
            names, pixels = [], []
    if names:
        yield done()


def _synthetic_images(pre: Preprocessing, spec: InputSpec) -> Iterator[tuple[str, Any]]:
    from PIL import Image

    count = spec.max_samples or DEFAULT_SYNTHETIC_SAMPLES
    h, w = pre.image_size
    size = (max(h, 32) * 8 // 7, max(w, 32) * 8 // 7)  # a little larger: the model's own crop applies
    for i in range(count):
        yield f"synthetic #{i}", Image.fromarray(synthetic_image(i, spec.seed, size))


def _default_texts(spec: InputSpec) -> Iterator[tuple[str, str]]:
    count = min(spec.max_samples or len(DEFAULT_TEXTS), len(DEFAULT_TEXTS))
    for i, text in enumerate(DEFAULT_TEXTS[:count]):
        yield f"built-in text #{i}", text


def _tokenized(
    pre: Preprocessing,
    spec: InputSpec,
    texts: Iterator[tuple[str, str]],
    tokenless: Skipped,
    cut: Truncation | None = None,
) -> Iterator[Batch]:
    """Batches of ``texts`` through the model's tokenizer, truncated to its maximum length (``cut`` counts
    the samples that were longer). A sample the tokenizer gives no token (a line of characters its
    normaliser removes) is left out of its batch and named in ``tokenless``: a model given no token has
    nothing to compute, and X would have no row."""
    tok = pre.tokenizer
    limit = pre.pad_to or pre.max_length
    chunk: list[tuple[str, str]] = []

    def encode(items: list[tuple[str, str]]) -> Iterator[Batch]:  # none where no sample has a token
        padding: Any = "max_length" if pre.pad_to else True
        enc = tok(
            [t for _, t in items],
            padding=padding,
            truncation=True,
            max_length=limit,
            return_tensors="pt",
        )
        mask = enc["attention_mask"]
        ids = enc["input_ids"]
        if pre.vocab_size and ids.numel() and int(ids.max()) >= pre.vocab_size:
            raise InputError(
                f"the tokenizer gives token id {int(ids.max())}, but the model's vocabulary has"
                f" {pre.vocab_size} entries: the tokenizer files do not belong to this model",
                "put the model's own tokenizer files beside its weights",
            )
        lengths = mask.sum(dim=1)
        encodings = getattr(enc, "encodings", None)  # a fast tokenizer's, each with what truncation dropped
        if bool((lengths == 0).any()):  # rows only: the padded width is the longest kept sample's
            keep = (lengths > 0).tolist()
            for (name, _), k in zip(items, keep, strict=True):
                if not k:
                    tokenless.add(name, "no token")
            if not any(keep):
                return
            items = [item for item, k in zip(items, keep, strict=True) if k]
            rows = torch.tensor(keep)
            ids, mask, lengths = ids[rows], mask[rows], lengths[rows]
            if encodings is not None:
                encodings = [e for e, k in zip(encodings, keep, strict=True) if k]
        if cut is not None:
            cut.exact = encodings is not None
            if encodings is not None:
                cut.truncated += sum(1 for e in encodings if e.overflowing)
            else:
                cut.truncated += int((lengths >= limit).sum())
        yield Batch({"input_ids": ids, "attention_mask": mask}, lengths, [n for n, _ in items])

    for item in texts:
        chunk.append(item)
        if len(chunk) == spec.batch_size:
            yield from encode(chunk)
            chunk = []
    if chunk:
        yield from encode(chunk)


def _random_tokens(pre: Preprocessing, spec: InputSpec) -> Iterator[Batch]:
    """Seeded random token ids, drawn batch by batch from one generator: sample i's ids depend on the seed
    alone, not on the batch size (CPU ``torch.randint`` draws element by element, row after row)."""
    count = spec.max_samples or DEFAULT_SYNTHETIC_SAMPLES
    length = pre.pad_to or min(RANDOM_TOKENS_LENGTH, pre.max_length)
    gen = torch.Generator().manual_seed(spec.seed)
    for start in range(0, count, spec.batch_size):
        size = min(spec.batch_size, count - start)
        try:
            part = torch.randint(0, max(pre.vocab_size, 2), (size, length), generator=gen)
        except (RuntimeError, MemoryError):
            raise InputError(
                f"a batch of {size} sequences of {length} random token ids does not fit in memory",
                "lower `batch_size`",
            ) from None
        names = [f"random tokens #{i}" for i in range(start, start + size)]
        yield Batch({"input_ids": part, "attention_mask": torch.ones_like(part)}, None, names)


def _synthetic_batches(made: Synthetic, spec: InputSpec, count: int) -> Iterator[Batch]:
    for start in range(0, count, spec.batch_size):
        size = min(spec.batch_size, count - start)
        names = [f"synthetic {made.kind} #{i}" for i in range(start, start + size)]
        yield Batch(made.make(spec.seed, start, size), None, names)


def _synthetic_stream(made: Synthetic, spec: InputSpec) -> InputStream:
    """Synthetic clips of an audio or video model, labelled as such (audio and video files are not read)."""
    if spec.images is not None or spec.text is not None:
        given = "`images`" if spec.images is not None else "`text`"
        raise UsageError(
            f"{given} was given for a{'n' * (made.kind == 'audio')} {made.kind} model",
            f"this model reads {made.kind}; leave both out to analyse it on synthetic clips",
        )
    n = spec.max_samples or DEFAULT_SYNTHETIC_SAMPLES
    return InputStream(
        made.kind, made.describe(n, spec.seed), lambda s: _synthetic_batches(made, spec, n), expected=n
    )


def _image_folder(folder: Path) -> Path:
    """``images`` checked: a folder; a file, a missing path or anything else is one InputError saying so."""
    if folder.is_dir():
        return folder
    if not folder.exists() and not folder.is_symlink():
        raise InputError(f"`images={folder}`: no such folder", "give a folder that contains images")
    if folder.is_file():
        raise InputError(
            f"`images={folder}` is a file, not a folder",
            f"give the folder that holds the images, e.g. `images={folder.parent}`",
        )
    raise InputError(f"`images={folder}` is not a folder", "give a folder that contains images")


def _text_stream(pre: Preprocessing, spec: InputSpec, source: TextSource) -> InputStream:
    """The lines of ``source``, each read only as far as the model can use it, through its tokenizer."""
    limit = pre.pad_to or pre.max_length
    keep = byte_bound(limit)

    def make(s: InputStream) -> Iterator[Batch]:
        s.truncation = Truncation(source.label, limit, keep)
        lines = text_lines(source, keep, spec.max_samples, s.truncation.lines)
        return _tokenized(pre, spec, lines, s.tokenless, s.truncation)

    return InputStream("text", f"lines of {source.label}", make)


def stream(pre: Preprocessing, spec: InputSpec) -> InputStream:
    """The batches a run will analyse, with the label that says what they are."""
    made = _stream(pre, spec)
    beside = pre.beside
    if beside is None or made.kind not in ("text", "synthetic") or pre.modality != "text":
        return made
    inner = made.make

    def more(s: InputStream) -> Iterator[Batch]:
        start = 0
        for batch in inner(s):
            batch.inputs.update(beside(batch.inputs, spec.seed, start))
            start += batch.size
            yield batch

    made.make = more
    return made


def _stream(pre: Preprocessing, spec: InputSpec) -> InputStream:
    if pre.synthetic is not None:
        return _synthetic_stream(pre.synthetic, spec)
    if pre.modality == "images":
        if spec.text is not None:
            raise UsageError("`text` was given for an image model", "use `images=DIR` for this model")
        if spec.images is not None:
            folder = _image_folder(spec.images)
            return InputStream(
                "images",
                f"images in {folder}",
                lambda s: _image_batches(pre, spec, folder_images(folder, spec.max_samples, s.files)),
                where=str(folder),
            )
        n = spec.max_samples or DEFAULT_SYNTHETIC_SAMPLES
        return InputStream(
            "synthetic",
            f"{n} synthetic 1/f images (seed {spec.seed}; pass `images` DIR for real ones)",
            lambda s: _image_batches(pre, spec, _synthetic_images(pre, spec)),
            expected=n,
        )
    if spec.images is not None:
        raise UsageError("`images` was given for a text model", "use `text=FILE` for this model")
    if pre.tokenizer is None:
        if spec.text is not None:
            raise InputError(
                "`text` was given but this model has no tokenizer",
                "load the model from a folder or hub id that includes its tokenizer files",
            )
        n = spec.max_samples or DEFAULT_SYNTHETIC_SAMPLES
        return InputStream(
            "synthetic",
            f"{n} sequences of random token ids (seed {spec.seed}; the model has no tokenizer)",
            lambda s: _random_tokens(pre, spec),
            expected=n,
        )
    if spec.text is not None:
        return _text_stream(pre, spec, text_source(spec.text))
    n = min(spec.max_samples or len(DEFAULT_TEXTS), len(DEFAULT_TEXTS))
    return InputStream(
        "text",
        f"{n} built-in English sentences (pass `text` FILE for your own)",
        lambda s: _tokenized(pre, spec, _default_texts(spec), s.tokenless),
        expected=n,
    )
