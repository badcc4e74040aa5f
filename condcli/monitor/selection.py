"""Which metrics a monitor logs, and the key each value is logged under (stable: dashboards read them).

A metric is named by its key in the metric registry (:mod:`condcli.reports.metrics`). A name selects the
metric in
every scope that has it: ``"kappa"`` is κ(X) (``condcli/kappa_x``) and κ(X_l) of every chosen layer
(``condcli/layer_3/kappa``). A layer's index is zero-padded to the width of the model's layer count
(``layer_03`` of a 12-layer model), so the keys sort in layer order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from condcli.errors import InputError, UsageError
from condcli.reports.metrics import ALL, EMBEDDING, FORWARD, HEADLINE, WEIGHTS

PREFIX = "condcli"
FLOOR = "floor"  # the key beside a value that is only a floor: 1.0 there, absent elsewhere
DEFAULT_METRICS: tuple[str, ...] = tuple(m.key for m in HEADLINE)  # κ(X), κ(X_l), μ(LA), H(P)
NAMES: tuple[str, ...] = tuple(dict.fromkeys(m.key for m in ALL))  # every name ``metrics`` accepts
# the embedding metrics' keys: X is named in them, so they read apart from the per-layer κ(X_l)
EMBEDDING_KEYS: dict[str, str] = {
    "kappa": "kappa_x",
    "kappa_conditioned": "kappa_x_conditioned",
    "kappa_corrected": "kappa_x_corrected",
}


def embedding_key(key: str) -> str:
    """The logged key of an embedding metric, e.g. ``condcli/kappa_x``."""
    return f"{PREFIX}/{EMBEDDING_KEYS[key]}"


def layer_key(index: int, key: str, count: int) -> str:
    """The logged key of a per-layer metric (forward or weight scope) of layer ``index`` of a model of
    ``count`` layers, the index zero-padded to the digits of ``count``: ``condcli/layer_03/mu_la`` (12
    layers), ``condcli/layer_3/mu_la`` (6)."""
    return f"{PREFIX}/layer_{index:0{len(str(count))}d}/{key}"


def floor_key(key: str) -> str:
    """The key logged beside ``key`` (as 1.0) where its median is only a floor σ_1/tol
    (docs/math.md#spectra); absent where it is not."""
    return f"{key}/{FLOOR}"


@dataclass(frozen=True)
class Selection:
    """The registry keys asked for, by scope, in registry order."""

    embedding: tuple[str, ...]  # of EMBEDDING: X
    forward: tuple[str, ...]  # of FORWARD: per layer, from the forward pass
    weight: tuple[str, ...]  # of WEIGHTS: per layer, model constants (they move as the model trains)

    @property
    def per_layer(self) -> bool:
        return bool(self.forward or self.weight)

    @property
    def needs_probs(self) -> bool:
        """Whether P must be captured."""
        return any(m.needs_probs for m in FORWARD if m.key in self.forward)


def select(metrics: Iterable[str] | str | None, conditioned: bool) -> Selection:
    """The metrics named (None: :data:`DEFAULT_METRICS`), plus κ(X + λI_k) where ``conditioned``.

    An unknown name, an empty list or something that is not a list of names is one error naming them all.
    """
    if metrics is None:
        names = list(DEFAULT_METRICS)
    elif isinstance(metrics, str):
        names = [metrics]
    else:
        try:
            names = list(metrics)
        except TypeError:
            raise UsageError(
                f"metrics must be a list of metric names, got {type(metrics).__name__}",
                f"e.g. metrics=['kappa', 'mu_la']; names: {', '.join(NAMES)}",
            ) from None
    if not names:
        raise UsageError("metrics is empty", f"name at least one of {', '.join(NAMES)}")
    unknown = [n for n in names if not isinstance(n, str) or n not in NAMES]
    if unknown:
        raise InputError(
            f"metrics names unknown metric(s) {', '.join(repr(n) for n in unknown)}",
            f"the metrics are: {', '.join(NAMES)}",
        )
    wanted = set(names) | ({"kappa_conditioned"} if conditioned else set())
    return Selection(
        embedding=tuple(m.key for m in EMBEDDING if m.key in wanted),
        forward=tuple(m.key for m in FORWARD if m.key in wanted),
        weight=tuple(m.key for m in WEIGHTS if m.key in wanted),
    )
