"""A GGUF file's header, read by condcli before any library maps the file: bounded, and checked against it.

GGUF (llama.cpp's format) is a header of key-value metadata and a tensor table, then the tensor data. Its
counts and lengths are 64-bit numbers that readers trust: the ``gguf`` package's ``GGUFReader`` and
transformers both size lists by them. Here every count is checked against the bytes left in the file and
against a ceiling far above any real model's before anything is built from it, each string is read only
where its length fits, and every tensor must lie inside the data section, no two of them sharing bytes. Only
the values condcli needs are kept (architecture, name, file type, tokenizer kind); arrays are walked, not
stored. The model's sizes that transformers divides by or takes as a norm's epsilon or rope's base
(:data:`POSITIVE`, :data:`NON_NEGATIVE`) must be sane numbers. Any way the header is wrong is one
:class:`InputError` naming the file; the file is looked at before it is opened (a FIFO is never read).
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from condcli.errors import InputError
from condcli.parsing import regular_file

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 counts in 32 bits; neither transformers nor llama.cpp still reads it
MAX_TENSORS = 1 << 16  # the largest real files hold ~1,100 tensors (experts merged per layer)
MAX_KEYS = 1 << 16  # real files hold a few dozen keys
MAX_ARRAY = 1 << 21  # elements of one metadata array: 8× the largest real vocabulary (262,144)
MAX_STRING = 1 << 24  # bytes of one string (a chat template is tens of KiB)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ELEMENTS = 1 << 63  # a dimension, or a tensor's element count, must stay below (int64 indexing)
DEFAULT_ALIGNMENT = 32
FIXED = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
TEXT_KEYS = ("general.architecture", "general.name", "tokenizer.ggml.model")
NUMBER_KEYS = ("general.file_type", "general.alignment")
INTEGERS = (0, 1, 2, 3, 4, 5, 10, 11)
REALS = (6, 12)
# a model's sizes and constants, by the end of their key ("llama.attention.head_count"): what each must be
POSITIVE = (".attention.head_count", ".attention.head_count_kv", ".embedding_length", ".rope.freq_base")
NON_NEGATIVE = (".attention.layer_norm_rms_epsilon", ".attention.layer_norm_epsilon", ".block_count")
REEXPORT = "convert the model again (llama.cpp's convert_hf_to_gguf.py), or download the file again"
# the smallest encodings: a key-value pair (empty key, a u8 value) and a tensor entry (empty name, 1 dim)
MIN_KV_BYTES = 8 + 4 + 1
MIN_TENSOR_BYTES = 8 + 4 + 8 + 4 + 8


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of the table: its shape in GGUF order (fastest-moving first) and where its bytes are."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def elements(self) -> int:
        count = 1
        for d in self.dims:
            count *= d
        return count


@dataclass(frozen=True)
class GgufHeader:
    """What condcli needs of a GGUF file, read without trusting it."""

    path: Path
    version: int
    metadata: dict[str, Any]  # the values condcli keeps (TEXT_KEYS, NUMBER_KEYS)
    tensors: tuple[TensorEntry, ...]
    data_start: int

    @property
    def architecture(self) -> str:
        return str(self.metadata["general.architecture"])


class _Reader:
    """Little-endian reads from a file of known size; reading past its end is one error naming the file."""

    def __init__(self, stream: BinaryIO, size: int, path: Path) -> None:
        self.stream, self.size, self.path, self.pos = stream, size, path, 0

    def fail(self, why: str) -> InputError:
        return InputError(f"{self.path} is not a readable GGUF file: {why}", REEXPORT)

    @property
    def left(self) -> int:
        return self.size - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise self.fail(
                f"it ends inside its header ({what} at byte {self.pos}; the file has {self.size})"
            )
        data = self.stream.read(n)
        if len(data) != n:  # the file shrank while it was read
            raise self.fail(f"it ends inside its header ({what} at byte {self.pos})")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.left:
            raise self.fail(
                f"it ends inside its header ({what} at byte {self.pos}; the file has {self.size})"
            )
        self.stream.seek(n, 1)
        self.pos += n

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def length(self, what: str) -> int:
        n = int(self.unpack("<Q", what))
        if n > MAX_STRING:
            raise self.fail(f"{what} claims {n} bytes (at most {MAX_STRING} are read)")
        if n > self.left:
            raise self.fail(f"{what} claims {n} bytes, more than the {self.left} left in the file")
        return n

    def string(self, what: str) -> str:
        raw = self.take(self.length(f"the length of {what}"), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None

    def count(self, what: str, most: int, each: int) -> int:
        """A count of items of at least ``each`` bytes: at most ``most``, and fitting in the bytes left."""
        n = int(self.unpack("<Q", what))
        if n > most:
            raise self.fail(f"its header claims {n} {what} (at most {most} are read)")
        if n * each > self.left:
            raise self.fail(f"its header claims {n} {what}, more than the {self.left} bytes left can hold")
        return n


def _value(r: _Reader, kind: int, key: str) -> Any:
    """One metadata value: a scalar or a string is returned, an array is walked (its length returned)."""
    if kind in FIXED:
        return r.unpack(FIXED[kind], f"the value of {key!r}")
    if kind == STRING:
        return r.string(f"the value of {key!r}")
    if kind != ARRAY:
        raise r.fail(f"{key!r} has value type {kind}, which GGUF does not define")
    element = int(r.unpack("<I", f"the element type of {key!r}"))
    if element == ARRAY:
        raise r.fail(f"{key!r} is an array of arrays, which transformers cannot read")
    if element not in FIXED and element != STRING:
        raise r.fail(f"{key!r} is an array of value type {element}, which GGUF does not define")
    width = struct.calcsize(FIXED[element]) if element in FIXED else 8
    n = r.count(f"elements in {key!r}", MAX_ARRAY, width)
    if element in FIXED:
        r.skip(n * width, f"the elements of {key!r}")
        return n
    for i in range(n):
        r.skip(r.length(f"the length of {key!r}[{i}]"), f"{key!r}[{i}]")
    return n


def _unique(r: _Reader, seen: set[str], what: str, i: int) -> str:
    """The next name (``what`` of entry ``i``: a key, a tensor's name), refused where it came before."""
    name = r.string(f"{what} {i}")
    if name in seen:
        raise r.fail(f"it holds the {what.removeprefix('the name of ')} {name!r} twice")
    seen.add(name)
    return name


def _metadata(r: _Reader, count: int) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    seen: set[str] = set()
    for i in range(count):
        key = _unique(r, seen, "key", i)
        kind = int(r.unpack("<I", f"the value type of {key!r}"))
        value = _value(r, kind, key)
        if key in TEXT_KEYS or key in NUMBER_KEYS:
            if kind != STRING if key in TEXT_KEYS else kind not in INTEGERS:
                raise r.fail(f"{key!r} has value type {kind}, not the type GGUF gives it")
            kept[key] = value
        _check_constant(r, key, kind, value)
    return kept


def _check_constant(r: _Reader, key: str, kind: int, value: Any) -> None:
    """A size or constant of the model (:data:`POSITIVE`, :data:`NON_NEGATIVE`) that is a number, finite,
    and above zero (at least zero); an array (one value per layer) is not looked into."""
    positive = key.endswith(POSITIVE)
    if kind == ARRAY or not (positive or key.endswith(NON_NEGATIVE)):
        return
    if kind not in INTEGERS + REALS:
        raise r.fail(f"{key} has value type {kind}, not a number")
    if math.isnan(value) or math.isinf(value):
        raise r.fail(f"{key} is {value}, not a finite number")
    if value < 0 or (positive and value == 0):
        need = "above 0" if positive else "at least 0"
        raise r.fail(f"{key} is {value:g}; it must be {need}")


def _tensors(r: _Reader, count: int, sizes: dict[int, tuple[int, int]]) -> list[TensorEntry]:
    found: list[TensorEntry] = []
    names: set[str] = set()
    for i in range(count):
        name = _unique(r, names, "the name of tensor", i)
        ndims = int(r.unpack("<I", f"the dimension count of {name!r}"))
        if not 1 <= ndims <= MAX_DIMS:
            raise r.fail(f"tensor {name!r} has {ndims} dimensions (GGUF allows 1 to {MAX_DIMS})")
        dims = tuple(int(r.unpack("<Q", f"a dimension of {name!r}")) for _ in range(ndims))
        ggml_type = int(r.unpack("<I", f"the type of {name!r}"))
        offset = int(r.unpack("<Q", f"the offset of {name!r}"))
        if ggml_type not in sizes:
            raise r.fail(f"tensor {name!r} has ggml type {ggml_type}, which the gguf package does not know")
        block, block_bytes = sizes[ggml_type]
        if dims[0] % block:
            raise r.fail(f"tensor {name!r}: its rows of {dims[0]} do not fill blocks of {block}")
        elements = 1
        for d in dims:
            elements *= d
        if max(dims) >= MAX_ELEMENTS or math.prod(d for d in dims if d) >= MAX_ELEMENTS:
            raise r.fail(f"tensor {name!r} has dimensions {list(dims)}: more than 2^63 elements")
        found.append(TensorEntry(name, dims, ggml_type, offset, elements // block * block_bytes))
    return found


def _alignment(r: _Reader, kept: dict[str, Any]) -> int:
    alignment = kept.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
        raise r.fail(f"general.alignment is {alignment!r}, not a power of two")
    return alignment


def read_header(path: Path, sizes: dict[int, tuple[int, int]]) -> GgufHeader:
    """The header of the GGUF file ``path``, checked (module docstring); ``sizes``: ggml type → (elements,
    bytes) per block, the ``gguf`` package's ``GGML_QUANT_SIZES``."""
    size = regular_file(path, str(path), "give a GGUF file").st_size
    try:
        stream = path.open("rb")
    except OSError as e:
        raise InputError(
            f"cannot read {path}: {e.strerror or e}", "check the path and its permissions"
        ) from e
    with stream:
        r = _Reader(stream, size, path)
        if size < 4 or r.take(4, "the magic bytes") != MAGIC:
            raise r.fail("it does not start with the bytes GGUF")
        version = int(r.unpack("<I", "the version"))
        if version not in VERSIONS:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            why = "it is big-endian" if swapped in VERSIONS else f"it is version {version}"
            raise r.fail(f"{why}; transformers reads little-endian GGUF v2 and v3")
        n_tensors = r.count("tensors", MAX_TENSORS, MIN_TENSOR_BYTES)
        n_keys = r.count("metadata keys", MAX_KEYS, MIN_KV_BYTES)
        kept = _metadata(r, n_keys)
        if "general.architecture" not in kept:
            raise r.fail("its metadata names no general.architecture")
        tensors = _tensors(r, n_tensors, sizes)
        alignment = _alignment(r, kept)
        data_start = -(-r.pos // alignment) * alignment
    data = size - data_start
    for t in tensors:
        if t.offset % alignment:
            raise r.fail(f"tensor {t.name!r} starts at offset {t.offset}, not a multiple of {alignment}")
        if data < 0 or t.offset + t.nbytes > data:
            raise r.fail(
                f"tensor {t.name!r} ({t.nbytes} bytes at offset {t.offset}) lies past the end of the file"
                f" (its data section holds {max(data, 0)} bytes)"
            )
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors if t.nbytes)
    for (_, end, before), (start, _, name) in itertools.pairwise(spans):
        if start < end:
            raise r.fail(f"tensors {before!r} and {name!r} share bytes {start}…{end} of its data section")
    return GgufHeader(path, version, kept, tuple(tensors), data_start)
