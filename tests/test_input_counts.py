"""How many inputs a run had, in words a person would write, wherever it is said: the table header, the HTML
page's summary and every figure's title ("1 image", "16 images", "1 sample", "2 text samples")."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from condcli.cli.tables import header
from condcli.figures.common import title
from condcli.html.page import _inputs_line
from condcli.reports.envelope import InputsInfo, ModelInfo
from condcli.reports.reading import counted


@pytest.mark.parametrize(("count", "said"), [(1, "inputs: 1 sample — "), (2, "inputs: 2 samples — ")])
def test_the_sample_count_is_said_in_the_singular_for_one(count: int, said: str) -> None:
    out = io.StringIO()
    model = ModelInfo("vit-plain", "command line", "vit", "local", "file", 4)
    inputs = InputsInfo("images", "the first images", "resize 32", count, 65, 64, 0)
    header(Console(file=out, width=100), model, inputs)
    assert said in out.getvalue()


@pytest.mark.parametrize(
    ("count", "kind", "said"),
    [
        (1, "images", "1 image"),
        (16, "images", "16 images"),
        (1, "text", "1 text sample"),
        (2, "text", "2 text samples"),
        (2, None, "2 samples"),
    ],
)
def test_the_page_and_the_figures_count_alike(count: int, kind: str | None, said: str) -> None:
    assert counted(count, kind) == said
    inputs = {"count": count, "kind": kind}
    assert title({"model": {"spec": "m"}, "inputs": inputs}, "κ(X)") == f"κ(X)\nm ({said})"
    line = _inputs_line(inputs)
    assert line is not None and line.startswith(said)
