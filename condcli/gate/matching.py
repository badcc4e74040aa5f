"""The metrics of two spectrum reports matched side by side, with B/A ratios (what ``compare`` shows).

Layers are matched by index (their names may differ between families). Each model sees the inputs
through its own preprocessing; where that makes the inputs differ (an image model against a text model,
another count), the comparison is still made and a warning says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from condcli.gate.metrics import Metric, Statistic, extract_metrics
from condcli.gate.report import CompareRow

SEEN = "embedding.seen"  # the row "κ of the tokens the blocks see" (only when a model conditions itself)


def _row(key: str, x: Metric, y: Metric) -> CompareRow:
    return CompareRow(
        key=key,
        label_a=x.label,
        label_b=y.label,
        layer=x.layer,
        name_a=x.layer_name,
        name_b=y.layer_name,
        a=x.value,
        b=y.value,
        floor_a=x.floor,
        floor_b=y.floor,
    )


def _get(report: Mapping[str, Any], section: str, key: str) -> Any:
    part = report.get(section)
    return part.get(key) if isinstance(part, Mapping) else None


def context_warnings(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What differs between the two runs besides the model: inputs, λ, dtype, device, depth."""
    out = []
    kind_a, kind_b = _get(a, "inputs", "kind"), _get(b, "inputs", "kind")
    desc_a, desc_b = _get(a, "inputs", "description"), _get(b, "inputs", "description")
    if kind_a != kind_b:
        out.append(
            f"A saw {kind_a} inputs ({desc_a}) and B saw {kind_b} inputs ({desc_b}): "
            "each model's numbers are about its own inputs"
        )
    elif desc_a != desc_b:
        out.append(f"the inputs differ: A saw {desc_a}; B saw {desc_b}")
    pre_a, pre_b = _get(a, "inputs", "preprocessing"), _get(b, "inputs", "preprocessing")
    if kind_a == kind_b and pre_a != pre_b:
        out.append(f"each model preprocesses the inputs its own way: A: {pre_a}; B: {pre_b}")
    for key, what in (("lambda", "λ"), ("dtype", "dtype"), ("device", "device")):
        x, y = _get(a, "settings", key), _get(b, "settings", key)
        if x != y:
            out.append(f"{what} differs: {x!r} for A, {y!r} for B")
    depth_a, depth_b = _get(a, "model", "num_layers"), _get(b, "model", "num_layers")
    if depth_a != depth_b:
        out.append(f"A has {depth_a} layers and B {depth_b}: layers are matched by index")
    for side, report in (("A", a), ("B", b)):
        own = _get(report, "embedding", "model_conditioning")
        if own:
            out.append(
                f"{side} adds {own} at X itself: X is taken before it, and its plain forward (every "
                "per-layer number) is the conditioned one"
            )
    return out


def compare_reports(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    statistic: Statistic,
    seen_a: str | None = "kappa",
    seen_b: str | None = "kappa",
) -> tuple[list[CompareRow], list[str]]:
    """(rows for every metric both reports have, in A's order; warnings).

    ``seen_a``/``seen_b``: the embedding key of what each model's blocks see (see
    :func:`condcli.gate.rules.seen_key`); a first row compares those when a model conditions itself.
    """
    ma, mb = extract_metrics(a, statistic), extract_metrics(b, statistic)
    rows = []
    if seen_a and seen_b and (seen_a, seen_b) != ("kappa", "kappa"):
        rows.append(_row(SEEN, ma[f"embedding.{seen_a}"], mb[f"embedding.{seen_b}"]))
    rows += [_row(key, x, mb[key]) for key, x in ma.items() if key in mb]
    warnings = context_warnings(a, b)
    for side, key in (("A", seen_a), ("B", seen_b)):
        if key is None:
            warnings.append(
                f"{side} adds its own X + λ·I_k with another λ than `lam`: κ of what its blocks see is "
                "not measured (drop `lam` to compare it)"
            )
    only_a = [k for k in ma if k not in mb]
    only_b = [k for k in mb if k not in ma]
    for side, keys in (("A", only_a), ("B", only_b)):
        if keys:
            shown = ", ".join(keys[:6]) + (f", … ({len(keys) - 6} more)" if len(keys) > 6 else "")
            warnings.append(f"{len(keys)} metric(s) only {side} has, not compared: {shown}")
    return rows, warnings
