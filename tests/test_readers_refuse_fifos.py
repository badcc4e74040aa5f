"""Issue 38, item 3: no reader opens a FIFO (``open`` blocks until a writer comes) or a device: each looks
at the path first (``condcli.parsing.regular_file``). On 077f2f7 a FIFO as a GGUF file or as
``model.safetensors`` hung ``spectrum`` / ``weights`` in ``open()``; here a hang fails the test after a few
seconds instead of blocking the suite."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from condcli.errors import InputError
from condcli.inputs.images import Skipped, folder_images
from condcli.loading.gguf import read as read_gguf
from condcli.loading.safetensors_stream import read_header
from condcli.loading.weights_files import folder_weights, read_state_dict
from condcli.parsing import read_json


@contextmanager
def _no_hang(seconds: int = 20) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


READERS: dict[str, Callable[[Path], Any]] = {
    "safetensors": read_header,
    "gguf": read_gguf,
    "json": lambda p: read_json(p, str(p), "fix it"),
    "checkpoint": read_state_dict,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path, reader: str) -> None:
    fifo = tmp_path / ("p.pt" if reader == "checkpoint" else "p")
    os.mkfifo(fifo)
    with _no_hang(), pytest.raises(InputError) as e:
        READERS[reader](fifo)
    assert "is a FIFO, not a file" in e.value.message and e.value.exit_code == 2


def test_a_device_is_refused(tmp_path: Path) -> None:
    with _no_hang(), pytest.raises(InputError, match="is a device, not a file"):
        read_header(Path("/dev/zero"))


def test_an_index_that_is_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    os.mkfifo(tmp_path / "model.safetensors.index.json")
    with _no_hang(), pytest.raises(InputError, match=r"index.json is a FIFO, not a file"):
        folder_weights(tmp_path, "hf")


def test_a_fifo_among_images_is_skipped_and_named(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.png")
    skipped = Skipped()
    with _no_hang():
        assert list(folder_images(tmp_path, None, skipped)) == []
    assert "p.png" in skipped.examples() and "a FIFO, not a file" in skipped.examples()
