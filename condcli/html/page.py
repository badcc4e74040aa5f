"""The page shell: header (model, inputs, settings, versions, where X was taken), the list of sections,
the inline CSS and JS. Every string from the report is HTML-escaped here or by the sections."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from condcli.html.assets import CSS, JS
from condcli.html.section import Report, Section

TITLES = {
    "spectrum": "Spectrum report",
    "sweep-lambda": "λ sweep report",
    "rank-decay": "Rank-decay report",
    "check": "Check report",
    "compare": "Compare report",
    "track": "Training monitor report",
}


def _m(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    """A scalar of the report as text (None for null or a nested value)."""
    if value is None or isinstance(value, (Mapping, list)):
        return None
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _pairs(d: Mapping[str, Any], keys: Sequence[tuple[str, str]]) -> list[tuple[str, str | None]]:
    return [(label, _text(d.get(key))) for key, label in keys]


def _dl(pairs: Sequence[tuple[str, str | None]]) -> str:
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in pairs if v is not None)
    return f'<dl class="kv">{items}</dl>' if items else ""


def header(report: Report) -> str:
    """The model (spec, where it came from, family, source, weights, layers), the inputs, the settings, the
    tool and schema versions and where X was taken; keys a report lacks are left out."""
    model, inputs, settings = _m(report.get("model")), _m(report.get("inputs")), _m(report.get("settings"))
    tool, emb = _m(report.get("tool")), _m(report.get("embedding"))
    command = _text(report.get("command")) or "report"
    spec = _text(model.get("spec"))
    title = TITLES.get(command, f"{command} report") + (f": {spec}" if spec else "")
    model_pairs = _pairs(
        model,
        (
            ("spec", "model"),
            ("from", "from"),
            ("family", "family"),
            ("source", "source"),
            ("weights", "weights"),
            ("num_layers", "layers"),
        ),
    )
    count = inputs.get("count")
    shape = (
        f"up to {inputs['tokens']} tokens × d {inputs['dim']}"
        if inputs.get("tokens") is not None and inputs.get("dim") is not None
        else None
    )
    input_pairs = [
        (
            "inputs",
            f"{count} {_text(inputs.get('kind')) or ''} samples".replace("  ", " ")
            if count is not None
            else _text(inputs.get("kind")),
        ),
        ("described", _text(inputs.get("description"))),
        ("shape", shape),
        ("preprocessing", _text(inputs.get("preprocessing"))),
        ("skipped", _text(inputs.get("skipped")) if inputs.get("skipped") else None),
    ]
    where = _text(emb.get("where"))
    x_pairs = [
        (
            "X taken at",
            where + (f" — {emb['description']}" if _text(emb.get("description")) else "") if where else None,
        )
    ]
    if emb.get("after_position_encoding") is False:
        x_pairs.append(("position encoding", "not in X"))
    setting_pairs = [(str(k), _text(v)) for k, v in settings.items()]
    version = [
        ("tool", " ".join(x for x in (_text(tool.get("name")), _text(tool.get("version"))) if x) or None),
        ("torch", _text(tool.get("torch"))),
        ("schema_version", _text(report.get("schema_version"))),
        ("command", command),
    ]
    blocks = [
        ("Model", _dl(model_pairs)),
        ("Inputs", _dl(input_pairs + x_pairs)),
        ("Settings", _dl(setting_pairs)),
        ("Versions", _dl(version)),
    ]
    cols = "".join(f"<div><h3>{escape(k)}</h3>{v}</div>" for k, v in blocks if v)
    return f'<header class="top"><h1>{escape(title)}</h1><div class="meta">{cols}</div></header>'


def nav(sections: Sequence[Section]) -> str:
    """The list of sections, linked by anchor."""
    items = "".join(f'<li><a href="#{escape(s.id)}">{escape(s.title)}</a></li>' for s in sections)
    return f'<nav class="toc" aria-label="sections"><b>Contents</b><ol>{items}</ol></nav>'


def page(report: Report, sections: Sequence[Section]) -> str:
    """The whole self-contained page."""
    spec = _text(_m(report.get("model")).get("spec"))
    command = _text(report.get("command")) or "report"
    title = f"condcli {command}" + (f" — {spec}" if spec else "")
    body = "".join(
        f'<section id="{escape(s.id)}"><h2>{escape(s.title)}</h2>{s.html}</section>' for s in sections
    )
    tool = _m(report.get("tool"))
    made = " ".join(x for x in (_text(tool.get("name")), _text(tool.get("version"))) if x) or "condcli"
    return (
        '<!DOCTYPE html><html lang="en" class="nojs"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f'{header(report)}<div class="layout">{nav(sections)}<main>{body}</main></div>'
        f"<footer>Written by {escape(made)} from the report's JSON; self-contained, works offline. "
        "Hover a chart or a cell for full-precision values; click a column header to sort.</footer>"
        f"<script>{JS}</script></body></html>"
    )
