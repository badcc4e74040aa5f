"""The figure of a ``track`` report: κ(X) and κ(X + λ·I_k), then per layer κ(X_l), μ(LA) and H(P), against
the training step; one point per checkpoint (the median over samples), read from
``track.checkpoints[i].report`` only. κ and μ on a log axis, H(P) on a linear one from 0 to 1; the layers
coloured by depth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from condcli.figures.common import Report, as_map, as_maps, lam_text, median, title
from condcli.figures.model import LEGEND_MAX, Axis, DepthBar, Figure, Panel, Series, depth
from condcli.reports.metrics import EMBEDDING, HEADLINE, forward

LAYER_METRICS = tuple((m.key, m.log_scale) for m in HEADLINE)  # (layer metric, log y): the headline
STEP = Axis("training step", integer=True)


def checkpoints(report: Report) -> list[Mapping[str, Any]]:
    return as_maps(as_map(report.get("track")).get("checkpoints"))


def layers_of(point: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    """A checkpoint's layers by index."""
    return {int(layer["index"]): layer for layer in as_maps(as_map(point.get("report")).get("layers"))}


def indices(points: Sequence[Mapping[str, Any]]) -> list[int]:
    """Every layer index of any checkpoint, in order."""
    return sorted({i for p in points for i in layers_of(p)})


def _embedding(points: Sequence[Mapping[str, Any]], steps: list[float], lam: str) -> Panel:
    def medians(key: str) -> list[float]:
        return [median(as_map(as_map(p.get("report")).get("embedding")).get(key)) for p in points]

    kx = next(m for m in EMBEDDING if m.key == "kappa").label
    series = [
        Series(kx, steps, medians("kappa"), "plain", markers=True),
        Series(f"κ(X + {lam}·I_k)", steps, medians("kappa_conditioned"), "conditioned", markers=True),
    ]
    return Panel("Embedded tokens X", STEP, Axis("median κ", "log"), series, missing="checkpoints")


def layer_panel(points: Sequence[Mapping[str, Any]], steps: list[float], key: str, log: bool) -> Panel:
    """One curve per layer of ``key``'s median against the step; layers never observed are left out."""
    label = forward(key).label
    values = {i: [median(layers_of(p).get(i, {}).get(key)) for p in points] for i in indices(points)}
    observed = {i: y for i, y in values.items() if any(v == v for v in y)}  # not all NaN
    lo = min(observed, default=0)
    hi = max(max(observed, default=1), lo + 1)
    series = [
        Series(f"layer {i}", steps, y, depth((i - lo) / (hi - lo)), markers=True, width=1.2)
        for i, y in observed.items()
    ]
    return Panel(
        f"{label} per layer",
        STEP,
        Axis(f"median {label}", "log") if log else Axis(f"median {label}", "lin", (-0.02, 1.02)),
        series,
        legend_shown=len(series) <= LEGEND_MAX,
        depth=DepthBar(lo, hi, "layer (depth)"),
        missing="not observable for this model",
    )


def track(report: Report) -> Figure:
    """κ(X) and κ(X + λ·I_k); then, when layers were analysed, κ(X_l), μ(LA) and H(P) per layer."""
    points = checkpoints(report)
    steps = [float(p["step"]) for p in points]
    panels = [_embedding(points, steps, lam_text(report))]
    if indices(points):
        panels += [layer_panel(points, steps, key, log) for key, log in LAYER_METRICS]
        return Figure(
            title(report, "Conditioning against the training step"), panels, (11.0, 8.0), grid=(2, 2)
        )
    return Figure(title(report, "Conditioning against the training step"), panels, (7.0, 4.5))
