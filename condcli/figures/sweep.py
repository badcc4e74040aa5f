"""The figure of a ``sweep-lambda`` report: κ(X + λ·I_k) against λ with its p10–p90 band, the Weyl bound,
κ(X), κ(X + C), the target and the recommended λ; beside it, where the report has one, the per-layer sweep
coloured by depth."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from condcli.figures.common import Report, as_map, as_maps, floats, title, to_float
from condcli.figures.model import (
    LEGEND_MAX,
    Axis,
    Band,
    Dash,
    DepthBar,
    Figure,
    Panel,
    Ref,
    Scale,
    Series,
    depth,
)
from condcli.numbers import num
from condcli.reports.metrics import EMBEDDING

LABELS = {m.key: m.label for m in EMBEDDING}  # the registry's labels
WEYL = "Weyl bound (σ_1+λ)/(λ−σ_1)"


def lambda_scale(lambdas: list[float]) -> Scale:
    """Log when every λ is positive and they span two decades or more."""
    ok = [v for v in lambdas if math.isfinite(v)]
    return "log" if ok and min(ok) > 0 and max(ok) / min(ok) >= 100 else "lin"


def _main(s: Mapping[str, Any], lambdas: list[float], scale: Scale) -> Panel:
    kappa = as_map(s.get("kappa"))
    med, p10, p90 = (floats(kappa.get(q)) for q in ("median", "p10", "p90"))
    series = []
    if lambdas and len(med) == len(lambdas):
        band = Band(p10, p90, "p10–p90") if len(p10) == len(p90) == len(lambdas) else None
        name = f"{LABELS['kappa_conditioned']}, median"
        series.append(Series(name, lambdas, med, "conditioned", markers=True, band=band))
        weyl = floats(s.get("weyl_bound"))
        if len(weyl) == len(lambdas):  # "inf": no bound at that λ (λ ≤ σ_1), not drawn
            bound = [v if math.isfinite(v) else math.nan for v in weyl]
            series.append(Series(WEYL, lambdas, bound, "bound", "dashed"))
    refs = []
    lines: tuple[tuple[str, str, Dash, str], ...] = (
        ("kappa_plain", "plain", "solid", LABELS["kappa"]),
        ("kappa_corrected", "corrected", "dashdot", LABELS["kappa_corrected"]),
        ("target_kappa", "target", "dotted", "target κ"),
    )
    for key, role, dash, name in lines:
        v = to_float(s.get(key))
        if v is not None and not math.isnan(v):
            refs.append(Ref(v, f"{name} = {num(v)}", role, "y", dash, annotate=True))
    rec = to_float(s.get("recommended_lambda"))
    if rec is not None:
        refs.append(Ref(rec, f"recommended λ = {num(rec)}", "recommended", "x", "dotted", annotate=True))
    return Panel(
        "Condition number of X + λ·I_k",
        Axis("λ", scale),
        Axis("κ", "log"),
        series,
        refs,
        missing="the κ of the λ grid",
    )


def _layers(s: Mapping[str, Any], lambdas: list[float], scale: Scale) -> Panel | None:
    found = as_maps(s.get("layers"))
    if not found:
        return None
    idx = [to_float(layer.get("index")) or 0.0 for layer in found]
    lo, hi = min(idx), max(max(idx), min(idx) + 1)
    series = [
        Series(
            f"layer {int(i)} ({layer.get('name', '')})",
            lambdas,
            floats(layer.get("kappa_median")),
            depth((i - lo) / (hi - lo)),
            width=1.2,
        )
        for i, layer in zip(idx, found, strict=True)
    ]
    return Panel(
        "Conditioned forward: κ per layer",
        Axis("λ", scale),
        Axis("median κ(X_l)", "log"),
        series,
        legend_shown=len(series) <= LEGEND_MAX,
        depth=DepthBar(lo, hi, "layer (depth)"),
    )


def sweep(report: Report) -> Figure:
    """κ(X + λ·I_k) against λ, and the per-layer sweep where the report has one."""
    s = as_map(report.get("sweep"))
    lambdas = floats(s.get("lambdas"))
    scale = lambda_scale(lambdas)
    panels = [_main(s, lambdas, scale)]
    layer_panel = _layers(s, lambdas, scale)
    if layer_panel is not None:
        panels.append(layer_panel)
    size = (11.0 if layer_panel is not None else 7.0, 4.5)
    return Figure(title(report, "λ sweep"), panels, size, grid=(1, len(panels)))
