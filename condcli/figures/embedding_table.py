"""The figure of a report's ``embedding_table`` (``spectrum`` and ``weights`` reports): σ_i of the token
embedding table E against i, log scale (the paper's Figure 1, for the vocabulary instead of a sample), with
the untied output head beside it and float64's resolution as a reference line."""

from __future__ import annotations

from condcli.figures.common import Report, as_map, floats, to_float
from condcli.figures.model import Axis, Figure, Panel, Ref, Series
from condcli.numbers import num
from condcli.spectra._tensor import EPS64

TITLE = "Singular values of the embedding table E"


def _kappa(part: object) -> str:
    return num(to_float(as_map(part).get("kappa")))


def _shape(part: object) -> str:
    shape = as_map(part).get("shape")
    return " × ".join(str(v) for v in shape) if isinstance(shape, list) else "?"


def embedding_table(report: Report) -> Figure | None:
    """σ_i of E (and of the untied output head) by index i, log y; None where the report has no table."""
    table = report.get("embedding_table")
    if not isinstance(table, dict):
        return None
    series = []
    sigma = floats(table.get("spectrum"))
    if sigma:
        name = f"E {_shape(table)} (κ = {_kappa(table)})"
        series.append(Series(name, [float(i) for i in range(1, len(sigma) + 1)], sigma, "plain", group="E"))
    head = table.get("lm_head")
    head_sigma = floats(as_map(head).get("spectrum"))
    if head_sigma:
        name = f"output head {_shape(head)}, untied (κ = {_kappa(head)})"
        xs = [float(i) for i in range(1, len(head_sigma) + 1)]
        series.append(Series(name, xs, head_sigma, "conditioned", dash="dashed", group="lm_head"))
    refs = []
    shape = table.get("shape")
    if sigma and isinstance(shape, list) and all(isinstance(v, int) for v in shape):
        floor = max(shape) * EPS64 * sigma[0]
        refs.append(Ref(floor, "float64 resolution of E (max(V, d)·eps·σ_1)", "bound"))
    tied = table.get("tied")
    head_words = {True: "output head tied to E", False: "output head untied", None: "no output head"}
    title = f"{TITLE}\n{as_map(report.get('model')).get('spec', '')}; {head_words.get(tied, '')}"
    panel = Panel(
        TITLE, Axis("singular value index i"), Axis("σ_i", "log"), series, refs, missing="the spectrum of E"
    )
    return Figure(title, [panel], (7.0, 4.5))
