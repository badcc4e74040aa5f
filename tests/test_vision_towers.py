"""Issue 42 (docs/breadth-audit.md): a vision model that keeps transformers' default main input
(``input_ids``) while its forward reads only ``pixel_values`` (MGP-STR, Idefics3's and SmolVLM's vision
towers) was fed token ids and refused; it gets images, and its reading is proven on the first batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.sweep_architectures import build_hf
from condcli.cli.main import main


@pytest.mark.parametrize("model_type", ["mgp-str", "idefics3_vision"])
def test_a_vision_tower_with_the_default_main_input_gets_images(
    model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    build_hf(model_type, tmp_path / "m")
    capsys.readouterr()
    code = main(["spectrum", str(tmp_path / "m"), "--max-samples", "2", "--layers", "0,-1", "--json"])
    out = capsys.readouterr().out
    assert code in (0, None)
    report = json.loads(out)
    assert report["inputs"]["kind"] in ("synthetic", "images")
    assert report["layers"] and {layer["qkv_source"] for layer in report["layers"]} == {"generic (verified)"}
