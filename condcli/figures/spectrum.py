"""The figures of a ``spectrum`` report: Figure 1 of the paper (σ_i of X and of X + λ·I_k by index, p10–p90
bands), the per-layer κ and μ curves (plain against conditioned), and the layers × heads heatmaps of the
page. Labels come from the metric registry."""

from __future__ import annotations

import math
import statistics
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
from condcli.figures.model import Axis, Band, Dash, Figure, Heatmap, Marker, Panel, Ref, Series
from condcli.numbers import measured, num, rel_uncertainty
from condcli.reports.metrics import forward
from condcli.reports.reading import stat

SPECTRUM = "Singular values of the embedded tokens X"
BAND_VISIBLE = 0.01  # a p10–p90 band is drawn where its median width is at least this share of the y axis
NEAR_RESOLUTION = 100.0  # the resolution is drawn where the smallest measured σ is within this factor of it


def visible_band(band: Band, ys: list[float], share: float = BAND_VISIBLE) -> bool:
    """Whether a p10–p90 band on a log axis is wide enough to see: over the median index at least ``share``
    of the decades the drawn values ``ys`` span (a band of one sample, or of nearly equal samples, hides
    under its line: ViT-B's X + 10·I_k is 0.2 % of the axis wide, its X 2.3 %)."""
    shown = [v for v in ys if math.isfinite(v) and v > 0]
    if len(shown) < 2:
        return False
    span = max(math.log10(max(shown) / min(shown)), 1.0)
    widths = [
        math.log10(hi / lo)
        for lo, hi in zip(band.lo, band.hi, strict=False)
        if math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi
    ]
    return bool(widths) and statistics.median(widths) >= share * span


def tail_refs(
    spectrum: Mapping[str, Any], what: str, color: str, dash: Dash = "dotted", resolution: str = ""
) -> list[Ref]:
    """The marks of a spectrum's unresolved tail (docs/math.md#spectra-below-resolution): a vertical line
    where its median stops being measured, named with the count ("i ≥ 11: 8 exactly 0 (10 distinct of 18
    rows: repeated tokens)"), and its resolution as a horizontal line ("resolution of X: tol = 5.3e-15").
    The resolution is drawn only where the spectrum has a tail or comes within :data:`NEAR_RESOLUTION` of
    it (far below the data it would only squash the curve); none for a report without the marks."""
    tol = to_float(spectrum.get("resolution"))
    med = floats(spectrum.get("median"))
    if tol is None or not med:
        return []
    start = to_float(spectrum.get("unresolved_from"))
    lowest = min((v for v in med if v > 0), default=math.inf)
    refs = []
    if start is not None:
        i = int(start)
        zeros = sum(1 for v in med[i:] if v == 0)
        below = sum(1 for v in med[i:] if math.isnan(v))
        parts = []
        if zeros:
            parts.append(f"{zeros} exactly 0{_zero_cause(spectrum)}")
        if below:
            parts.append(f"{below} below resolution")
        refs.append(
            Ref(i + 0.5, f"{what}, i ≥ {i + 1}: " + ", ".join(parts), color, "x", dash, annotate=True)
        )
    if start is not None or tol * NEAR_RESOLUTION >= lowest:
        label = f"resolution of {what}: tol = {num(tol, 2)}{resolution}"
        refs.append(Ref(tol, label, "bound", "y", "dashdot", annotate=True))
    return refs


def _zero_cause(spectrum: Mapping[str, Any]) -> str:
    """ " (repeated tokens)" where the band's reason names them, else ""."""
    text = str(spectrum.get("unresolved_reason") or "")
    return " (repeated tokens)" if "repeated" in text else ""


def spectrum(report: Report) -> Figure:
    """σ_i of X (plain, vermillion) and of X + λ·I_k (conditioned, bluish green) by index i = 1 … k, log y,
    p10–p90 bands where they are wide enough to see; the legend gives each median κ (κ(X) with the digits
    its capture supports). Only measured values are drawn: an unresolved tail (exact zeros of repeated rows,
    values below the capture's resolution) is marked by a line where it starts, named with its count, and
    the resolution by a line (:func:`tail_refs`)."""
    emb = as_map(report.get("embedding"))
    lam = lam_text(report)
    below = int(to_float(emb.get("below_precision")) or 0)
    warn = f", ⚠ {below} below precision" if below else ""
    kappa = measured(stat(emb.get("kappa")), rel_uncertainty(emb.get("kappa"), "median"))
    dtype = emb.get("resolution_dtype")
    res = f" ({dtype})" if isinstance(dtype, str) else ""
    series, refs = [], []
    k = 0
    for key, color, name, group, kappa_text in (
        ("spectrum", "plain", "σ_i(X)", "plain", f"{kappa}{warn}"),
        (
            "spectrum_conditioned",
            "conditioned",
            f"σ_i(X + λ·I_k), λ = {lam}",
            "conditioned",
            num(stat(emb.get("kappa_conditioned"))),
        ),
    ):
        band = as_map(emb.get(key))
        med, p10, p90 = (floats(band.get(q)) for q in ("median", "p10", "p90"))
        if not med:
            continue
        k = max(k, len(med))
        spread = Band(p10, p90, f"{name}: p10–p90") if len(p10) == len(med) == len(p90) else None
        if spread is not None and not visible_band(spread, [*med, *p10, *p90]):
            spread = None  # as thin as the line: no band, and no legend entry for it
        series.append(
            Series(
                f"{name} (median κ = {kappa_text})", counting(len(med)), med, color, band=spread, group=group
            )
        )
        what = "X" if key == "spectrum" else f"X + {lam}·I_k"
        refs += tail_refs(band, what, color, resolution=res if key == "spectrum" else "")
    index = Axis("singular value index i", range=(1.0, float(max(k, 2))), integer=True)
    panel = Panel(SPECTRUM, index, Axis("σ_i", "log"), series, refs, missing="the spectrum of X")
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
    cond_name = f", X + {lam_text(report)}·I_k"  # the conditioned forward, by its λ (issue 41)
    kinds = [(False, "plain", "")] + ([(True, "conditioned", cond_name)] if has_cond else [])
    lines: tuple[tuple[str, Dash], ...] = (("kappa", "solid"), ("kappa_attn_input", "dashed"))
    mu = forward("mu_la").label
    kappas, mus = [], []
    for cond, role, suffix in kinds:
        for key, dash in lines:
            y = _medians(found, key, cond)
            shape: Marker = "square" if dash == "dashed" else "circle"  # κ(A_l) visible on κ(X_l) (41)
            kappas.append(Series(forward(key).label + suffix, x, y, role, dash, True, shape, group=role))
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
