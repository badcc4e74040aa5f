"""`check --weights-only`: the weights alone gated as `condcli weights` reads them (no inputs, no forward):
κ(E) against float64 NumPy of the saved table, exit 0/1 by the rule, JUnit, the page, and one line with exit
2 for a rule or option that needs a forward."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.tiny_llm import tiny_llama


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    path = tmp_path_factory.mktemp("llama")
    tiny_llama(path)
    from safetensors.numpy import load_file

    e = load_file(str(path / "model.safetensors"))["model.embed_tokens.weight"].astype(np.float64)
    s = np.linalg.svd(e, compute_uv=False)
    return path, float(s[0] / s[-1])


def test_the_rule_judges_kappa_of_e(
    folder: tuple[Path, float], cli: Callable[..., Any], tmp_path: Path
) -> None:
    path, kappa = folder
    junit = tmp_path / "j.xml"
    passed = cli("check", str(path), "--weights-only", "--max-kappa-table", str(kappa * 1.01), "--json")
    assert passed.exit_code == 0, passed.output
    r = json.loads(passed.stdout)
    assert r["weights_only"] is True and r["command"] == "check" and "inputs" not in r
    assert r["checks"][0]["value"] == pytest.approx(kappa, rel=1e-6)
    assert r["embedding_table"]["kappa"] == pytest.approx(kappa, rel=1e-6)
    out = tmp_path / "out"
    args = ("--max-kappa-table", str(kappa * 0.99), "--junit", str(junit), "--out", str(out))
    failed = cli("check", str(path), "--weights-only", *args)
    assert failed.exit_code == 1
    assert "rules (the weights alone: no inputs, no forward)" in failed.stdout
    assert "the weights alone (no inputs, no forward)" in failed.stdout
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("1", "1")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Embedding table E" in page and "Weights per layer" in page and "Per-layer table" not in page


@pytest.mark.parametrize(
    ("extra", "text"),
    [
        (["--max-kappa", "10"], "--max-kappa needs inputs and a forward, and --weights-only runs none"),
        (["--max-kappa-table", "10", "--max-samples", "2"], "--max-samples is for a forward"),
        (["--max-kappa-table", "10", "--conditioned"], "--conditioned is a forward"),
    ],
)
def test_what_needs_a_forward_is_refused(
    folder: tuple[Path, float], cli: Callable[..., Any], extra: list[str], text: str
) -> None:
    result = cli("check", str(folder[0]), "--weights-only", *extra)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and text in result.stderr
