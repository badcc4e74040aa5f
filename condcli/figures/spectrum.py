"""The figures of a ``spectrum`` report: Figure 1 of the paper (σ_i of X and of X + λ·I_k by index, p10–p90
bands), the per-layer κ and μ curves (plain against conditioned), and the layers × heads heatmaps of the
page. Labels come from the metric registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from condcli.figures.common import (
    Report,
    as_map,
    as_maps,
    counting,
    floats,
    lam_text,
    median,
    title,
    to_float,
)
from condcli.figures.model import Axis, Band, Dash, Figure, Heatmap, Panel, Series
from condcli.html.numbers import stat
from condcli.numbers import measured, num, rel_uncertainty
from condcli.reports.metrics import forward

SPECTRUM = "Singular values of the embedded tokens X"


def spectrum(report: Report) -> Figure:
    """σ_i of X (plain, vermillion) and of X + λ·I_k (conditioned, bluish green) by index, log y, p10–p90
    bands; the legend gives each median κ (κ(X) with the digits its capture supports)."""
    emb = as_map(report.get("embedding"))
    lam = lam_text(report)
    below = int(to_float(emb.get("below_precision")) or 0)
    warn = f", ⚠ {below} below precision" if below else ""
    kappa = measured(stat(emb.get("kappa")), rel_uncertainty(emb.get("kappa"), "median"))
    series = []
    for key, color, name, group, kappa_text in (
        ("spectrum", "plain", "X", "plain", f"{kappa}{warn}"),
        (
            "spectrum_conditioned",
            "conditioned",
            f"X + λ·I_k, λ = {lam}",
            "conditioned",
            num(stat(emb.get("kappa_conditioned"))),
        ),
    ):
        band = as_map(emb.get(key))
        med, p10, p90 = (floats(band.get(q)) for q in ("median", "p10", "p90"))
        if not med:
            continue
        series.append(
            Series(
                f"{name} (median κ = {kappa_text})",
                counting(len(med)),
                med,
                color,
                band=Band(p10, p90, f"{name}: p10–p90") if len(p10) == len(med) == len(p90) else None,
                group=group,
            )
        )
    panel = Panel(
        SPECTRUM, Axis("singular value index i"), Axis("σ_i", "log"), series, missing="the spectrum of X"
    )
    return Figure(title(report, SPECTRUM), [panel], (7.0, 4.5))


def _medians(layers: list[Mapping[str, Any]], key: str, conditioned: bool) -> list[float]:
    return [median((as_map(layer.get("conditioned")) if conditioned else layer).get(key)) for layer in layers]


def layers(report: Report) -> Figure | None:
    """Per-layer median κ(X_l) and κ(A_l) (left) and μ(LA) (right), plain (vermillion) against conditioned
    (bluish green); None without layers."""
    found = as_maps(report.get("layers"))
    if not found:
        return None
    x = [to_float(layer.get("index")) or float(i) for i, layer in enumerate(found)]
    has_cond = any(isinstance(layer.get("conditioned"), Mapping) for layer in found)
    kinds = [(False, "plain", "")] + ([(True, "conditioned", ", conditioned")] if has_cond else [])
    lines: tuple[tuple[str, Dash], ...] = (("kappa", "solid"), ("kappa_attn_input", "dashed"))
    mu = forward("mu_la").label
    kappas, mus = [], []
    for cond, role, suffix in kinds:
        for key, dash in lines:
            y = _medians(found, key, cond)
            kappas.append(Series(forward(key).label + suffix, x, y, role, dash, markers=True, group=role))
        mus.append(Series(mu + suffix, x, _medians(found, "mu_la", cond), role, markers=True, group=role))
    step = Axis("layer", integer=True)
    panels = [
        Panel("Condition numbers per layer", step, Axis("median κ", "log"), kappas),
        Panel(
            f"Linear-attention bound {mu} per layer", step, Axis(f"median {mu} (max over heads)", "log"), mus
        ),
    ]
    return Figure(title(report, "Per-layer conditioning"), panels, (11.0, 4.5), grid=(1, 2))


def heads_heatmap(report: Report, key: str) -> Heatmap | None:
    """layers × heads of a per-head median (log colour scale); None where no head has a positive one."""
    found = [layer for layer in as_maps(report.get("layers")) if as_maps(layer.get("heads_detail"))]
    rows = []
    for layer in found:
        heads = as_maps(layer.get("heads_detail"))
        row = [float("nan")] * max(int(to_float(h.get("head")) or 0) + 1 for h in heads)
        for h in heads:
            row[int(to_float(h.get("head")) or 0)] = median(h.get(key))
        rows.append(row)
    if not any(v > 0 and v != float("inf") for row in rows for v in row):
        return None
    width = max(len(r) for r in rows)
    label = forward(key).label
    return Heatmap(
        f"{label} per layer and head (median over samples; log colour scale)",
        [str(layer.get("index")) for layer in found],
        [str(j) for j in range(width)],
        [r + [float("nan")] * (width - len(r)) for r in rows],
        label,
        log=True,
        digits=2,
        bar_label=label,
    )
