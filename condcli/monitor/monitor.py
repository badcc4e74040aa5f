""":class:`Monitor`: κ(X), κ(X_l), μ(LA) and attention entropy of a model in training, on one probe batch.

It runs condcli's own analysis on an in-memory module: the module condcli analyses is found as the CLI finds
it (a transformers model's base model, an encoder-decoder's encoder: :func:`condcli.loading.hf.
analysed_module`), its adapter comes from the family registry (:func:`condcli.adapters.adapter_for`), one
plain forward is captured (:func:`condcli.capture.capture`) and reduced by the CLI's accumulators
(:class:`~condcli.analysis.embedding.EmbeddingAccumulator`, :class:`~condcli.analysis.layers.
ForwardAccumulator`, :func:`~condcli.analysis.layers.weight_kappas`), with padding cut per sample as the
CLI cuts it (:func:`condcli.analysis.persample.trim`). So a value logged here equals what ``condcli
spectrum`` reports for the same weights and inputs (its median over the samples).

The batch loop of :func:`condcli.analysis.driver.drive` is not used: under torchrun it shards batches over
the ranks and exchanges results, while a monitor inside a distributed training run measures its own replica.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torch import nn

from condcli.adapters import adapter_for
from condcli.analysis.common import check_lambda, resolve_lambda
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.layers import ForwardAccumulator, weight_kappas
from condcli.analysis.persample import trim
from condcli.analysis.track_probe import probe_bytes
from condcli.capture import LayerCapture, capture, exact_lookup, layer_set
from condcli.errors import UsageError
from condcli.inputs.batches import Batch
from condcli.loading.hf import analysed_module
from condcli.monitor.probe import main_input, probe_batch, untouched
from condcli.monitor.selection import embedding_key, floor_key, layer_key, select
from condcli.reports.metrics import forward
from condcli.spectra.aggregate import Aggregate


def check_count(value: Any, name: str, example: int = 16) -> int:
    """A count parameter (``max_samples``, ``every_n_steps``): an int ≥ 1, else one error naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"`{name}` must be an integer ≥ 1, got {value!r}", f"e.g. `{name}={example}`")
    return value


def _analysed(model: nn.Module) -> nn.Module:
    """The part of ``model`` the CLI analyses; ``use_cache``, which finding it switches off, is put back."""
    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(model, transformers.PreTrainedModel):
        return model
    config = getattr(getattr(model, "base_model", model), "config", None)
    cache = getattr(config, "use_cache", None)
    analysed, _ = analysed_module(model)
    if isinstance(cache, bool):
        config.use_cache = cache  # type: ignore[union-attr]
    return analysed


def _put(out: dict[str, float], key: str, value: Aggregate) -> None:
    """The median under ``key``; beside it ``key/floor`` = 1.0 where the median is only a floor (no floor
    key otherwise: a dashboard gets a floor series only where there is one)."""
    out[key] = float(value.median)
    if value.is_floor("median"):
        out[floor_key(key)] = 1.0


class Monitor:
    """Measure a model's conditioning on a probe batch, for custom training loops.

    ``layers``: indices (None: all; negative count from the end). ``metrics``: names from the metric
    registry (:data:`condcli.monitor.selection.NAMES`; None: κ(X), κ(X_l), μ(LA), attention entropy).
    ``lam``: also log κ(X + λI_k) (a model that adds its own shift at X logs it with its own λ).
    ``max_samples``: the first samples of each batch measured.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        layers: Iterable[int] | None = None,
        metrics: Iterable[str] | str | None = None,
        lam: float | None = None,
        max_samples: int = 16,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise UsageError(f"model must be a torch nn.Module, got {type(model).__name__}", "pass the model")
        self.max_samples = check_count(max_samples, "max_samples")
        self.model = model
        self.analysed = _analysed(model)
        self.adapter = adapter_for(self.analysed)
        builtin = self.adapter.builtin
        self.lam = resolve_lambda(lam, self.adapter)  # checked: finite and ≥ 0
        conditioned = lam is not None or (builtin is not None and builtin.mode == "shift")
        self.selection = select(metrics, conditioned)
        if layers is not None and not isinstance(layers, Iterable):
            raise UsageError(
                f"`layers` must be a list of layer indices, got {layers!r}", "e.g. `layers=[0, -1]`"
            )
        self.layers = layer_set(self.adapter, layers) if self.selection.per_layer else []

    def measure(self, batch: Any) -> dict[str, float]:
        """The logged values on ``batch`` (what the model takes: a dict of tensors, or one tensor), each the
        median over its first ``max_samples`` samples; a median that is only a floor has ``<key>/floor`` = 1.0
        beside it (absent otherwise).

        Runs in eval mode under ``no_grad``; every module's training flag, the RNGs and the gradients are as
        they were afterwards, and no hook is left on the model.
        """
        probe = probe_batch(batch, self.adapter, self.max_samples)
        with untouched(self.model, self.analysed):
            return self._measure(probe)

    def probe_file(self, batch: Any, source: str) -> bytes:
        """The content of the probe file (:data:`condcli.analysis.track_probe.PROBE_FILE`) of ``batch``: the
        tensors :meth:`measure` feeds (its first ``max_samples`` samples, the keys the analysed module
        reads), from which ``condcli track`` gives the values :meth:`measure` gives (``source``: where the
        samples came from, e.g. "the evaluation dataset")."""
        probe = probe_batch(batch, self.adapter, self.max_samples)
        return probe_bytes(probe.inputs, main_input(self.adapter), source)

    def _measure(self, probe: Batch) -> dict[str, float]:
        adapter, chosen, sel = self.adapter, self.layers, self.selection
        specs = {s.index: s for s in adapter.layers}
        weights = {i: specs[i].weights() for i in chosen}
        kappas = {i: weight_kappas(w) for i, w in weights.items()}
        accs = {i: ForwardAccumulator(specs[i], weights[i], kappas[i].heads, per_head=False) for i in chosen}

        def sink(layer: LayerCapture) -> None:
            accs[layer.index].add(layer, probe.lengths)

        probes = ("x_in", "attn_in", "probs") if sel.needs_probs else ("x_in", "attn_in")
        got = capture(adapter, probe, layers=chosen, probes=probes if chosen else (), sink=sink)
        embedding = EmbeddingAccumulator(self.lam, spectra=False)
        embedding.add(
            trim(got.x, probe.lengths, (0,)), exact_lookup=exact_lookup(adapter.model, got.x, probe.inputs)
        )
        del got
        report = embedding.result(adapter)
        out: dict[str, float] = {}
        for key in sel.embedding:
            _put(out, embedding_key(key), getattr(report, key))
        for i in chosen:
            stats = accs[i].stats()
            for key in sel.weight:
                out[self._key(i, key)] = float(getattr(kappas[i], key.removeprefix("kappa_")))
            for key in sel.forward:
                value = stats[key]
                if value is not None:  # absent where the family's P cannot be observed
                    _put(out, self._key(i, key), value)
        return out

    def _key(self, index: int, key: str) -> str:
        return layer_key(index, key, len(self.adapter.layers))

    def keys(self) -> list[str]:
        """Every key :meth:`measure` can give, in its order: a ``<key>/floor`` key comes only where that
        median is a floor, and per-layer P metrics are absent where the family's P cannot be observed."""
        sel, out = self.selection, []
        for key in sel.embedding:
            out += [embedding_key(key)] + ([floor_key(embedding_key(key))] if key == "kappa" else [])
        for i in self.layers:
            out += [self._key(i, key) for key in sel.weight]
            for key in sel.forward:
                out += [self._key(i, key)] + ([floor_key(self._key(i, key))] if _floored(key) else [])
        return out


def _floored(key: str) -> bool:
    return forward(key).flag is not None


@dataclass(frozen=True)
class CallbackSettings:
    """What a training callback (Trainer, Lightning) measures and how often: its arguments, checked when the
    callback is made (one error then, not at the first logged step)."""

    every_n_steps: int
    layers: list[int] | None
    max_samples: int
    metrics: list[str] | str | None
    lam: float | None

    @classmethod
    def checked(
        cls,
        every_n_steps: Any,
        layers: Iterable[int] | None,
        max_samples: Any,
        metrics: Iterable[str] | str | None,
        lam: float | None,
    ) -> CallbackSettings:
        names = metrics if metrics is None or isinstance(metrics, str) else list(metrics)
        select(names, False)  # unknown names: one error now
        return cls(
            every_n_steps=check_count(every_n_steps, "every_n_steps", 100),
            layers=None if layers is None else list(layers),
            max_samples=check_count(max_samples, "max_samples"),
            metrics=names,
            lam=None if lam is None else check_lambda(lam, "lam"),
        )

    def monitor(self, model: nn.Module) -> Monitor:
        """The :class:`Monitor` of ``model`` with these settings."""
        return Monitor(
            model, layers=self.layers, metrics=self.metrics, lam=self.lam, max_samples=self.max_samples
        )
