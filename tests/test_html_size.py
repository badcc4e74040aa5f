"""The page stays small for a big model: ViT-B (12 layers × 12 heads, 197 tokens) with every layer and head,
rank-decay with per-head detail and the conditioned forward (the largest page: a curve per head and
panel), under 2 MB, and it still holds every layer's and head's value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from condcli.html import render_html
from tests.html_dom import parse
from tests.html_reports import jf

LIMIT = 2 * 1024 * 1024


def test_vit_b_every_layer_and_head_under_2_mb(cli_json: Callable[..., dict[str, Any]]) -> None:
    report = cli_json(
        "rank-decay",
        "vit_base_patch16_224",
        "--weights",
        "random",
        "--heads",
        "--conditioned",
        "10",
        "--max-samples",
        "1",
    )
    layers = report["rank_decay"]["layers"]
    assert len(layers) == 12 and all(len(layer["heads_detail"]) == 12 for layer in layers)
    page = render_html(report)
    size = len(page.encode("utf-8"))
    assert size < LIMIT, f"{size} bytes"
    tree = parse(page)
    cells = [r for r in tree.by_id("heat-plain").iter("rect") if "data-value" in r.attrs]
    assert sorted(float(r.attrs["data-value"]) for r in cells) == sorted(
        jf(v) for layer in layers for v in layer["heads_at_m"]
    )
    for layer in layers:
        assert len(list(tree.by_id(f"table-heads-cond-{layer['index']}").iter("tr"))) == 13
