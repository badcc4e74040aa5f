"""The headline numbers at the top of every page whose report has an embedding section: median κ(X),
κ(X + λ·I_k) and κ(X + C), marked as the tables mark them ("≥ x ⚠" a floor, "x ⚠" some samples below the
capture dtype's resolution), labels from the metric registry. A ``compare`` report shows κ(X) of A and B."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from condcli.figures.labels import html_text
from condcli.html.numbers import full, to_float
from condcli.html.section import Report, as_map, lam_text
from condcli.html.tables import FOOTNOTES, Cell, agg_cell
from condcli.reports.metrics import EMBEDDING

LABELS = {m.key: m.label for m in EMBEDDING}


def _below(emb: Mapping[str, Any]) -> int:
    """How many samples of X were below the capture dtype's resolution (0 where the report does not say)."""
    samples = emb.get("below_precision_samples")
    if isinstance(samples, list) and samples:
        return len(samples)
    return int(to_float(emb.get("below_precision")) or 0)


def box(cell: Cell, label: str, key: str) -> str:
    """One headline box: the value as the tables show it, full precision and the mark's meaning on hover."""
    assert cell.value is not None
    tip = full(cell.value) + "".join(f" — {FOOTNOTES[m]}" for m in cell.marks if m in FOOTNOTES)
    return (
        f'<div class="kpi" data-key="{escape(key)}" data-value="{full(cell.value)}" title="{escape(tip)}">'
        f"<b>{escape(cell.text)}</b><span>{html_text(label)}</span></div>"
    )


def embedding_boxes(report: Report, who: str = "") -> list[str]:
    """The boxes of one report's embedding section (``who``: a prefix naming the model, for compare)."""
    emb = as_map(report.get("embedding"))
    out = []
    for key in ("kappa", "kappa_conditioned", "kappa_corrected"):
        cell = agg_cell(emb.get(key), "median", _below(emb) if key == "kappa" else 0)
        if cell.value is None:
            continue
        label = LABELS[key].replace("λ", lam_text(report))
        out.append(box(cell, f"{who}median {label}", f"embedding.{key}"))
    return out


def headline(report: Report) -> str:
    """The headline of a report: its embedding's boxes, or for ``compare`` κ(X) of A and of B; "" where the
    report has no embedding section."""
    if report.get("command") == "compare":
        boxes = []
        for side in ("a", "b"):
            part = as_map(report.get(side))
            emb = as_map(part.get("embedding"))
            cell = agg_cell(emb.get("kappa"), "median", _below(emb))
            if cell.value is not None:
                spec = as_map(part.get("model")).get("spec")
                who = f"{side.upper()} ({spec})" if isinstance(spec, str) else side.upper()
                boxes.append(box(cell, f"{who}: median {LABELS['kappa']}", f"{side}.embedding.kappa"))
    else:
        boxes = embedding_boxes(report)
    return f'<div class="headline">{"".join(boxes)}</div>' if boxes else ""
