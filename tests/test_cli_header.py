"""The header every command's table starts with: how many samples, in words a person would write."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from condcli.cli.tables import header
from condcli.reports.envelope import InputsInfo, ModelInfo


@pytest.mark.parametrize(("count", "said"), [(1, "inputs: 1 sample — "), (2, "inputs: 2 samples — ")])
def test_the_sample_count_is_said_in_the_singular_for_one(count: int, said: str) -> None:
    out = io.StringIO()
    model = ModelInfo("vit-plain", "command line", "vit", "local", "file", 4)
    inputs = InputsInfo("images", "the first images", "resize 32", count, 65, 64, 0)
    header(Console(file=out, width=100), model, inputs)
    assert said in out.getvalue()
