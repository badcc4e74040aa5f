"""Safetensors files read tensor by tensor (and a table row block by row block), never whole.

Every file's header is checked here before safetensors opens it: the 8-byte length must leave room in the
file and be at most :data:`MAX_HEADER` bytes, the header must be a JSON object of tensors, and each tensor's
dtype, shape and offsets must agree with one another and lie inside the file, each size and their product
below 2^63 (what torch and the safetensors library index with), and no two tensors' bytes may overlap (else
every weight could read the same bytes). A file that breaks any of it is one :class:`InputError` naming the
file, read in bounded memory (the header's length is checked before it is read, and the file is looked at
before it is opened: a FIFO or a device is refused, never read).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from condcli.errors import InputError
from condcli.parsing import regular_file

REEXPORT = "re-export the weights (save_pretrained, save_for_hf or safetensors' save_file)"
MAX_HEADER = 100 << 20  # bytes: the safetensors library's own limit on a header
MAX_SIZE = 1 << 63  # a size, or a tensor's element count, must stay below (torch indexes with int64)
ITEMSIZE = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E4M3FNUZ": 1,
    "F8_E5M2FNUZ": 1,
    "F8_E8M0": 1,
    "C64": 8,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
}
FLOATS = ("F64", "F32", "F16", "BF16")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file, as its header describes it."""

    file: Path
    dtype: str  # safetensors' name: F32, BF16, …
    shape: tuple[int, ...]
    start: int = 0  # its first byte in the file (after the 8-byte length and the header)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


def _bad(path: Path | str, why: str) -> InputError:
    return InputError(f"{path} is not a readable safetensors file ({why})", REEXPORT)


def read_header(path: Path, label: str | None = None) -> dict[str, TensorInfo]:
    """The tensors of one safetensors file, its header checked against the file's size (see module);
    ``label`` names the file in an error (else its path)."""
    shown = label or str(path)
    size = regular_file(path, shown, REEXPORT).st_size
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise _bad(shown, "shorter than its 8-byte header length" if size else "the file is empty")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER or length > size - 8:
                raise _bad(
                    shown, f"its header claims {length} bytes, the file holds {size - 8} after the length"
                )
            raw = fh.read(length)
    except OSError as e:
        raise InputError(f"{shown}: cannot read ({e.strerror or e})", "check the file") from e
    try:
        header = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise _bad(shown, "its header is nested too deeply") from None
    except (UnicodeDecodeError, ValueError):
        raise _bad(shown, "its header is not JSON") from None
    if not isinstance(header, dict):
        raise _bad(shown, "its header is not a JSON object")
    data = size - 8 - length
    found = {
        name: _entry(path, shown, name, value, data, 8 + length)
        for name, value in header.items()
        if name != "__metadata__"
    }
    _no_overlap(shown, found)
    return found


def _no_overlap(shown: str, tensors: dict[str, TensorInfo]) -> None:
    """Refuse two tensors whose bytes overlap (empty tensors hold no bytes)."""
    spans = sorted((t.start, t.start + t.nbytes, name) for name, t in tensors.items() if t.nbytes)
    for (_, end, before), (start, _, name) in itertools.pairwise(spans):
        if start < end:
            raise _bad(
                shown, f"tensors {before[:80]!r} and {name[:80]!r} share bytes {start}…{end} of the file"
            )


def _entry(path: Path, shown: str, name: str, value: Any, data: int, base: int) -> TensorInfo:
    if not isinstance(value, dict):
        raise _bad(shown, f"tensor {name[:80]!r} is not described by an object")
    dtype, shape, offsets = value.get("dtype"), value.get("shape"), value.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in ITEMSIZE:
        raise _bad(shown, f"tensor {name[:80]!r} has unknown dtype {str(dtype)[:20]!r}")
    if not isinstance(shape, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape
    ):
        raise _bad(shown, f"tensor {name[:80]!r} has a shape that is not a list of sizes")
    if any(v >= MAX_SIZE for v in shape) or math.prod(v for v in shape if v) >= MAX_SIZE:
        raise _bad(shown, f"tensor {name[:80]!r} has shape {_shown(shape)}: more than 2^63 elements")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in offsets)
    ):
        raise _bad(shown, f"tensor {name[:80]!r} has no [begin, end] data offsets")
    begin, end = offsets
    if not 0 <= begin <= end <= data:
        raise _bad(shown, f"tensor {name[:80]!r} lies at bytes {begin}…{end}, past the {data} bytes of data")
    if (end - begin) != math.prod(shape) * ITEMSIZE[dtype]:
        raise _bad(shown, f"tensor {name[:80]!r}: {end - begin} bytes for shape {shape} of {dtype}")
    return TensorInfo(path, dtype, tuple(shape), base + begin)


def _shown(shape: list[int]) -> str:
    text = str(shape)
    return text if len(text) <= 80 else text[:77] + "…]"


def file_key(name: str, keys: Mapping[str, object], prefixes: Mapping[str, str] | None = None) -> str | None:
    """The key of ``keys`` that a model's parameter ``name`` was saved as: the name itself, or with the base
    model's prefix dropped or added (``prefixes``: {"model.": ""} style rewrites); None where none is."""
    if name in keys:
        return name
    for old, new in (prefixes or {}).items():
        if name.startswith(old) and new + name[len(old) :] in keys:
            return new + name[len(old) :]
        if not old and new + name in keys:
            return new + name
    return None


DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


class TensorFiles:
    """The tensors of one or more safetensors files (a model folder, sharded or not), read on demand.

    Each read is a positioned read of the tensor's own bytes (its offsets come from the checked header)
    into a buffer of its own: nothing is memory-mapped, so what stays resident is the tensor in hand, not
    the pages of every tensor read so far."""

    def __init__(self, files: list[Path]) -> None:
        self.tensors: dict[str, TensorInfo] = {}
        for file in files:
            self.tensors.update(read_header(file))
        self._open: dict[Path, int] = {}

    def _handle(self, file: Path) -> int:
        if file not in self._open:
            try:
                self._open[file] = os.open(file, os.O_RDONLY)
            except OSError as e:
                raise InputError(f"{file}: cannot read ({e.strerror or e})", "check the file") from e
        return self._open[file]

    def _bytes(self, info: TensorInfo, offset: int, count: int) -> torch.Tensor:
        """``count`` bytes of ``info``'s data from ``offset`` (relative to the tensor), as uint8."""
        out = bytearray(count)
        view, done, fd = memoryview(out), 0, self._handle(info.file)
        while done < count:
            got = os.preadv(fd, [view[done:]], info.start + offset + done)
            if got <= 0:
                raise _bad(info.file, f"it ends inside tensor data at byte {info.start + offset + done}")
            done += got
        return torch.frombuffer(out, dtype=torch.uint8) if count else torch.empty(0, dtype=torch.uint8)

    def key_of(self, name: str, prefixes: Mapping[str, str] | None = None) -> str | None:
        """The file key that a model's parameter ``name`` was saved as (:func:`file_key`)."""
        return file_key(name, self.tensors, prefixes)

    def read(self, key: str) -> torch.Tensor:
        """The whole tensor ``key`` (as stored)."""
        info = self.tensors[key]
        self._check_float(key, info)
        count = math.prod(info.shape) * ITEMSIZE[info.dtype]
        return self._bytes(info, 0, count).view(DTYPES[info.dtype]).reshape(info.shape)

    def rows(self, key: str, start: int, stop: int) -> torch.Tensor:
        """Rows [start, stop) of the 2-D tensor ``key``: only their bytes are read."""
        info = self.tensors[key]
        self._check_float(key, info)
        rows = info.shape[0] if info.shape else 0
        start, stop = max(0, min(start, rows)), max(0, min(stop, rows))
        stop = max(stop, start)
        row = math.prod(info.shape[1:]) * ITEMSIZE[info.dtype]
        data = self._bytes(info, start * row, (stop - start) * row)
        return data.view(DTYPES[info.dtype]).reshape(stop - start, *info.shape[1:])

    def _check_float(self, key: str, info: TensorInfo) -> None:
        if info.dtype not in FLOATS:
            raise InputError(
                f"weight '{key}' in {info.file} is {info.dtype}, not floating point",
                "give float weights (a quantized checkpoint must be dequantized first)",
            )

    def close(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()
