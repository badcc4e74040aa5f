"""Which library a model folder belongs to (condcli/loading/model_config.py ``flavour``): timm's save_for_hf
writes ``architecture`` and no ``model_type``; transformers always writes ``model_type``, and its
``TimmWrapper`` also writes the timm name as ``architecture`` with ``model_args`` null. Such a folder is
transformers' (issue 42: the sweep found it refused as a broken timm folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from condcli.errors import InputError
from condcli.loading.model_config import flavour


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"architecture": "vit_tiny_patch16_224", "model_args": {"depth": 2}}, "timm"),
        ({"model_type": "bert"}, "hf"),
        ({"architecture": "resnet50", "model_type": "timm_wrapper", "model_args": None}, "hf"),
    ],
)
def test_a_folder_is_the_library_its_config_names(
    config: dict[str, object], expected: str, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert flavour(tmp_path) == expected


def test_a_config_naming_neither_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="names neither a timm 'architecture' nor an HF 'model_type'"):
        flavour(tmp_path)
