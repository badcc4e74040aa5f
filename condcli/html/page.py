"""The page shell: header (model, inputs, settings, versions, where X was taken), the list of sections,
the inline CSS and JS. Every string from the report is HTML-escaped here or by the sections."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from condcli.figures.labels import html_text
from condcli.html.assets import CSS, JS
from condcli.html.section import Report, Section
from condcli.reports.reading import counted

TITLES = {
    "spectrum": "Spectrum report",
    "sweep-lambda": "λ sweep report",
    "rank-decay": "Rank-decay report",
    "check": "Check report",
    "compare": "Compare report",
    "track": "Training monitor report",
    "weights": "Weights report",
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


# the settings a reader knows by another name than their JSON key
SETTING_NAMES = {"lambda": "λ", "target_kappa": "target κ"}


def setting_name(key: str) -> str:
    """A settings key as a reader says it: "λ", "target κ", else its words ("conditioned forward")."""
    return SETTING_NAMES.get(key, key.replace("_", " "))


def setting_value(value: object) -> str | None:
    """A setting's value as a reader says it: yes/no for a flag, 10 for 10.0, a list joined by commas."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or None
    return _text(value)


def settings_line(settings: Mapping[str, Any]) -> str | None:
    """ "λ: 10, dtype: float32, …, conditioned forward: yes" (null settings left out)."""
    parts = [(setting_name(k), setting_value(v)) for k, v in settings.items()]
    return ", ".join(f"{k}: {v}" for k, v in parts if v is not None) or None


def _pairs(d: Mapping[str, Any], keys: Sequence[tuple[str, str]]) -> list[tuple[str, str | None]]:
    return [(label, _text(d.get(key))) for key, label in keys]


def _dl(pairs: Sequence[tuple[str, str | None]]) -> str:
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in pairs if v is not None)
    return f'<dl class="kv">{items}</dl>' if items else ""


def _model_line(model: Mapping[str, Any]) -> str | None:
    """ "vit-plain — the shipped sample ViT; timm-vit, pretrained weights (local), 6 layers"."""
    spec = _text(model.get("spec"))
    if spec is None:
        return None
    where = _text(model.get("from"))
    weights = _text(model.get("weights"))
    label = _text(model.get("weights_label")) or (f"{weights} weights" if weights else None)
    source = _text(model.get("source"))
    layers = _text(model.get("num_layers"))
    facts = [
        _text(model.get("family")),
        label + (f" ({source})" if source else "") if label else source,
        f"{layers} layers" if layers else None,
    ]
    return spec + (f" — {where}" if where else "") + "; " * any(facts) + ", ".join(f for f in facts if f)


def _inputs_line(inputs: Mapping[str, Any]) -> str | None:
    """ "16 synthetic samples, up to 65 tokens × d 96" (and how many files were skipped)."""
    count, kind = inputs.get("count"), _text(inputs.get("kind"))
    what = counted(count, kind) if count is not None else kind
    shape = (
        f"up to {inputs['tokens']} tokens × d {inputs['dim']}"
        if inputs.get("tokens") is not None and inputs.get("dim") is not None
        else None
    )
    skipped = f"{inputs['skipped']} unreadable file(s) skipped" if inputs.get("skipped") else None
    parts = [p for p in (what, shape, skipped) if p]
    return ", ".join(parts) if parts else None


def _x_line(emb: Mapping[str, Any]) -> str | None:
    where = _text(emb.get("where"))
    if where is None:
        return None
    return where + ("; position encoding not in X" if emb.get("after_position_encoding") is False else "")


def _versions(report: Report) -> list[tuple[str, str | None]]:
    tool = _m(report.get("tool"))
    return [
        ("tool", " ".join(x for x in (_text(tool.get("name")), _text(tool.get("version"))) if x) or None),
        ("torch", _text(tool.get("torch"))),
        ("schema_version", _text(report.get("schema_version"))),
        ("command", _text(report.get("command"))),
    ]


def _cards(report: Report) -> list[tuple[str, str]]:
    """Everything the report says about the model, inputs, settings and X, one card each (in full)."""
    model, inputs, emb = _m(report.get("model")), _m(report.get("inputs")), _m(report.get("embedding"))
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
    input_pairs = [
        ("inputs", _inputs_line(inputs)),
        ("described", _text(inputs.get("description"))),
        ("preprocessing", _text(inputs.get("preprocessing"))),
        ("X taken at", _text(emb.get("where"))),
        ("X is", _text(emb.get("description"))),
    ]
    if emb.get("after_position_encoding") is False:
        input_pairs.append(("position encoding", "not in X"))
    settings = [(setting_name(str(k)), setting_value(v)) for k, v in _m(report.get("settings")).items()]
    return [("Model", _dl(model_pairs)), ("Inputs and X", _dl(input_pairs)), ("Settings", _dl(settings))]


def _summary(report: Report) -> list[tuple[str, str | None]]:
    """The header's short lines: one per model (A and B for compare), its inputs, where X was taken, the
    settings and the versions."""
    if report.get("command") == "compare":
        rows: list[tuple[str, str | None]] = []
        for side in ("a", "b"):
            part = _m(report.get(side))
            x = _x_line(_m(part.get("embedding")))
            line = [_model_line(_m(part.get("model"))), _inputs_line(_m(part.get("inputs")))]
            line.append(f"X taken at {x}" if x else None)
            rows.append((side.upper(), "; ".join(p for p in line if p) or None))
        rows.append(("statistic", _text(report.get("statistic"))))
    else:
        settings = _m(report.get("settings"))
        rows = [
            ("model", _model_line(_m(report.get("model")))),
            ("inputs", _inputs_line(_m(report.get("inputs")))),
            ("X taken at", _x_line(_m(report.get("embedding")))),
            ("settings", settings_line(settings)),
        ]
    versions = [(k, v) for k, v in _versions(report)[:3] if v is not None]
    rows.append(("versions", ", ".join(v if k == "tool" else f"{k} {v}" for k, v in versions) or None))
    return rows


def title_of(report: Report) -> str:
    """ "Spectrum report: vit-plain"; "Compare report: vit-plain vs vit-conditioned"."""
    command = _text(report.get("command")) or "report"
    if command == "compare":
        specs = [_text(_m(_m(report.get(s)).get("model")).get("spec")) for s in ("a", "b")]
        spec = " vs ".join(s or "?" for s in specs) if any(specs) else None
    else:
        spec = _text(_m(report.get("model")).get("spec"))
    return TITLES.get(command, f"{command} report") + (f": {spec}" if spec else "")


def header(report: Report) -> str:
    """The title, one short line each for the model (both, for compare), the inputs, where X was taken,
    the settings and the versions, and the headline numbers; the long descriptions (preprocessing, what X
    is) in full behind a disclosure. Keys a report lacks are left out."""
    from condcli.html.headline import headline

    cards = [] if report.get("command") == "compare" else _cards(report)
    cards.append(("Versions", _dl(_versions(report))))
    cols = "".join(f"<div><h3>{escape(k)}</h3>{v}</div>" for k, v in cards if v)
    more = (
        '<details class="more"><summary>model, inputs, X, settings and versions in full</summary>'
        f'<div class="meta">{cols}</div></details>'
    )
    return (
        f'<header class="top"><div class="top-row"><div class="top-text"><h1>{escape(title_of(report))}</h1>'
        f"{_dl(_summary(report))}</div>{headline(report)}</div>{more}</header>"
    )


def nav(sections: Sequence[Section]) -> str:
    """The list of sections, linked by anchor."""
    items = "".join(f'<li><a href="#{escape(s.id)}">{html_text(s.title)}</a></li>' for s in sections)
    return f'<nav class="toc" aria-label="sections"><b>Contents</b><ol>{items}</ol></nav>'


def page(report: Report, sections: Sequence[Section]) -> str:
    """The whole self-contained page."""
    title = "condcli " + title_of(report)
    body = "".join(
        f'<section id="{escape(s.id)}"><h2>{html_text(s.title)}</h2>{s.html}</section>' for s in sections
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
