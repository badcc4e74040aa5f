"""``condcli inspect [MODEL]``: which family, where X is, each layer's attention and the captured shapes."""

from __future__ import annotations

import json
from typing import Any

from condcli.cli import options as o
from condcli.cli.main import command


def _shape(s: list[int] | None) -> str:
    return "—" if s is None else "×".join(str(v) for v in s)


def _render(report: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from condcli.cli.flags import as_flags
    from condcli.cli.tables import notes, stdout_console

    out = stdout_console(160)
    m, e, i = report["model"], report["embedding"], report["inputs"]
    what = escape(f"({m['from']}): family {m['family']}, {m['source']}, {m['weights']} weights")
    out.print(f"[bold]{escape(m['spec'])}[/] {what}")
    pos = "after position encoding" if e["after_position_encoding"] else "no absolute position encoding"
    lam = report["settings"].get("lambda")
    shift = "" if lam is None else f"; λ {lam:g} in X + λ·I_k"
    x = escape(f"X: {e['description']} [{e['where']}], {pos}")
    out.print(f"{x}; tokens {i['tokens']} × d {i['dim']}{shift}")
    out.print(escape(f"inputs: {as_flags(i['description'])}; {i['preprocessing']}"))
    table = Table("layer", "name", "attention", "heads", "X_l", "A_l (G×n×c)", "P (G×H×q×k)")
    for layer in report["layers"]:
        table.add_row(
            str(layer["index"]),
            escape(layer["name"]),
            escape(layer["attention"]),
            str(layer["heads"]),
            _shape(layer["x_in_shape"]),
            _shape(layer["attn_input_shape"]),
            _shape(layer["probs_shape"]),
        )
    out.print(table)
    notes(out, report["notes"])


@command("inspect")
@o.run_options(defaults={"batch_size": 2})
def inspect_command(run: o.RunOptions) -> None:
    """Load MODEL, capture one batch and show what condcli found: X, blocks, attention kind, shapes."""
    from condcli.analysis.inspect import inspect_model

    chosen = run.layer_choice()
    setup = o.setup_run(run)
    report = inspect_model(setup.loaded, setup.spec, setup.model_from, layers=chosen, lam=setup.lam)
    if run.as_json:
        print(json.dumps(report, indent=2))
    else:
        _render(report)
