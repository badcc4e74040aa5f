"""``condcli inspect [MODEL]``: which family, where X is, each layer's attention and the captured shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from condcli.cli import options as o
from condcli.cli.main import command


def _shape(s: list[int] | None) -> str:
    return "—" if s is None else "×".join(str(v) for v in s)


def _render(report: dict[str, Any]) -> None:
    out = Console(soft_wrap=True)
    if not out.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        out = Console(soft_wrap=True, width=160)
    m, e, i = report["model"], report["embedding"], report["inputs"]
    out.print(
        f"[bold]{m['spec']}[/] ({m['from']}): family {m['family']}, {m['source']}, {m['weights']} weights"
    )
    pos = "after position encoding" if e["after_position_encoding"] else "no absolute position encoding"
    out.print(f"X: {e['description']} [{e['where']}], {pos}; tokens {i['tokens']} × d {i['dim']}")
    out.print(f"inputs: {i['description']}; {i['preprocessing']}")
    table = Table("layer", "name", "attention", "heads", "X_l", "A_l (G×n×c)", "P (G×H×q×k)")
    for layer in report["layers"]:
        table.add_row(
            str(layer["index"]),
            layer["name"],
            layer["attention"],
            str(layer["heads"]),
            _shape(layer["x_in_shape"]),
            _shape(layer["attn_input_shape"]),
            _shape(layer["probs_shape"]),
        )
    out.print(table)
    for note in report["notes"]:
        out.print(f"[yellow]note:[/] {note}")


@command("inspect")
def inspect_command(
    model: o.ModelArg = None,
    weights: o.Weights = "pretrained",
    checkpoint: o.Checkpoint = None,
    seed: o.Seed = 0,
    images: o.Images = None,
    text: o.Text = None,
    max_samples: o.MaxSamples = None,
    batch_size: o.BatchSize = 2,
    device: o.Device = "auto",
    dtype: o.Dtype = None,
    trust_remote_code: o.TrustRemoteCode = False,
    as_json: o.Json = False,
) -> None:
    """Load MODEL, capture one batch and show what condcli found: X, blocks, attention kind, shapes."""
    from condcli.inspection import inspect_model
    from condcli.project_config import resolve_model
    from condcli.sources import load

    spec_text, model_from = resolve_model(model, Path.cwd() / "pyproject.toml")
    loaded = load(spec_text, o.load_options(weights, checkpoint, seed, device, dtype, trust_remote_code))
    report = inspect_model(loaded, o.input_spec(images, text, max_samples, batch_size, seed), model_from)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        _render(report)
