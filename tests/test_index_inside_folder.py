"""Issue 38, item 7: ``model.safetensors.index.json`` may name only files inside its model folder, for
``weights`` and ``spectrum`` alike (both read the index through ``folder_weights``). On 077f2f7 an index
naming ``../elsewhere/x.safetensors`` or an absolute path was followed. A hub snapshot's files are symlinks
into the cache's blob store, so the file itself may be a link; a folder on its way may not leave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from condcli.errors import InputError
from condcli.loading.weights_files import folder_weights


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": name}}))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.safetensors").write_bytes(b"")
    return folder


@pytest.mark.parametrize(
    "name", ["../elsewhere/x.safetensors", "sub/../../elsewhere/x.safetensors", "ABS", ""]
)
def test_names_outside_the_folder_are_refused(tmp_path: Path, name: str) -> None:
    name = str(tmp_path / "elsewhere" / "x.safetensors") if name == "ABS" else name
    folder = _folder(tmp_path, name)
    with pytest.raises(InputError) as e:
        folder_weights(folder, "hf")
    index = folder / "model.safetensors.index.json"
    assert e.value.message == f"{index} names {name!r}, which is not a file inside {folder}"


def test_a_folder_linked_outside_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "sub/x.safetensors")
    (folder / "sub").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="which is not a file inside"):
        folder_weights(folder, "hf")


def test_files_inside_and_linked_files_are_read(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "shards/x.safetensors")
    (folder / "shards").mkdir()
    (folder / "shards" / "x.safetensors").symlink_to(tmp_path / "elsewhere" / "x.safetensors")
    files, shards = folder_weights(folder, "hf")
    assert files == [folder / "shards" / "x.safetensors"] and shards == {"w": "shards/x.safetensors"}
