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


def _tail(part: object, what: str, color: str) -> list[Ref]:
    """A vertical line where a table's σ fall to or below float64 resolution, named with their count (the
    JSON gives them as null: docs/math.md#spectra-below-resolution); none where every σ is above it."""
    start = to_float(as_map(part).get("unresolved_from"))
    if start is None:
        return []
    i = int(start)
    count = len(floats(as_map(part).get("spectrum"))) - i
    name = f"{what}, i ≥ {i + 1}: {count} below resolution"
    return [Ref(i + 0.5, name, color, "x", "dotted", annotate=True)]


def embedding_table(report: Report) -> Figure | None:
    """σ_i of E (and of the untied output head) by index i = 1 … k, log y, only the σ above float64's
    resolution (drawn as a line); where some are not, a line where they start, named with their count.
    None where the report has no table."""
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
    resolution = to_float(table.get("resolution"))
    if sigma and resolution is None and isinstance(shape, list) and all(isinstance(v, int) for v in shape):
        resolution = max(shape) * EPS64 * sigma[0]  # a report from before the resolution was written
    if sigma and resolution is not None:
        refs.append(Ref(resolution, "float64 resolution of E (max(V, d)·eps·σ_1)", "bound"))
    for part, what, color in ((table, "E", "plain"), (as_map(head), "output head", "conditioned")):
        refs += _tail(part, what, color)
    tied = table.get("tied")
    head_words = {True: "output head tied to E", False: "output head untied", None: "no output head"}
    title = f"{TITLE}\n{as_map(report.get('model')).get('spec', '')}; {head_words.get(tied, '')}"
    k = max(len(sigma), len(head_sigma), 2)
    index = Axis("singular value index i", range=(1.0, float(k)), integer=True)
    panel = Panel(TITLE, index, Axis("σ_i", "log"), series, refs, missing="the spectrum of E")
    return Figure(title, [panel], (7.0, 4.5))
