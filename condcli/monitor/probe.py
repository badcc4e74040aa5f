"""What a monitor's measurement reads and what it must leave as it found it.

:func:`probe_batch` turns what the model takes (a dict of tensors, or one tensor) into condcli's
:class:`~condcli.inputs.batches.Batch`: the first ``max_samples`` samples, the keys the analysed module
reads, and
each text sample's length from its attention mask (padding is cut off X, X_l, A_l and P exactly as the
CLI cuts it, docs/math.md#x). :func:`untouched` restores every module's training flag, the model's
``use_cache`` and the random number generators (torch CPU and CUDA, NumPy, Python) after the measurement.
"""

from __future__ import annotations

import inspect
import itertools
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from condcli.adapters import Adapter
from condcli.analysis.track_probe import right_padded_lengths
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Batch

LABEL_KEYS = frozenset({"labels", "label", "label_ids", "return_loss"})  # the loss's inputs, not the model's


def main_input(adapter: Adapter) -> str:
    """The keyword of the model's main input (``input_ids``, ``pixel_values``, …)."""
    name = getattr(adapter.model, "main_input_name", None)
    if isinstance(name, str) and name:
        return name
    return "pixel_values" if adapter.input_kind == "images" else "input_ids"


def _reads(model: nn.Module, keys: list[str]) -> list[str]:
    """The keys of ``keys`` the module's forward takes by name (all but labels where it names none)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    named = [k for k in keys if k in params and params[k].kind is not inspect.Parameter.VAR_KEYWORD]
    return named if named else [k for k in keys if k not in LABEL_KEYS]


def probe_batch(batch: Any, adapter: Adapter, max_samples: int) -> Batch:
    """``batch`` (a mapping of tensors as the model takes them, or one input tensor) → its first
    ``max_samples`` samples as a :class:`Batch` with per-sample lengths from the attention mask."""
    main = main_input(adapter)
    if isinstance(batch, torch.Tensor):
        given: dict[str, Any] = {main: batch}
    elif isinstance(batch, Mapping):
        given = {str(k): v for k, v in batch.items()}
    else:
        raise UsageError(
            f"batch must be a dict of tensors or a tensor, got {type(batch).__name__}",
            "pass what the model takes, e.g. a tokenizer's output or a pixel tensor",
        )
    tensors = {k: v for k, v in given.items() if isinstance(v, torch.Tensor)}
    keys = _reads(adapter.model, list(tensors))
    if main not in keys:
        raise InputError(
            f"batch has no {main!r} (it holds {', '.join(sorted(given)) or 'nothing'})",
            f"pass the inputs of the model, with {main!r}",
        )
    size = int(tensors[main].shape[0]) if tensors[main].dim() else 0
    if size == 0:
        raise InputError("batch holds no samples", "pass at least one sample")
    uneven = [k for k in keys if tensors[k].dim() == 0 or int(tensors[k].shape[0]) != size]
    if uneven:
        raise InputError(
            f"batch entries {', '.join(uneven)} do not have the {size} samples of {main!r}",
            "pass tensors with the samples along the first dimension",
        )
    inputs = {k: tensors[k][:max_samples] for k in keys}
    count = int(inputs[main].shape[0])
    lengths = _lengths(inputs.get("attention_mask"), inputs[main], adapter)
    return Batch(inputs, lengths, [f"probe sample #{i}" for i in range(count)])


def _lengths(mask: torch.Tensor | None, main: torch.Tensor, adapter: Adapter) -> torch.Tensor | None:
    """Real tokens per sample of a right-padded (B, N) attention mask; None without one (no padding)."""
    if mask is None or adapter.input_kind != "text":
        return None
    return right_padded_lengths(mask, main, "batch")


def _cuda_started() -> bool:
    """Whether CUDA is initialised (its generators exist); never initialises it."""
    return bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]


def _rng_state() -> tuple[Any, ...]:
    cuda = torch.cuda.get_rng_state_all() if _cuda_started() else None
    return torch.get_rng_state(), cuda, np.random.get_state(), random.getstate()  # noqa: NPY002 (the global state itself)


def _set_rng_state(state: tuple[Any, ...]) -> None:
    cpu, cuda, numpy_state, python_state = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    np.random.set_state(numpy_state)  # noqa: NPY002
    random.setstate(python_state)


@contextmanager
def untouched(model: nn.Module, analysed: nn.Module) -> Iterator[None]:
    """``analysed`` in eval mode with ``use_cache`` off and gradients off inside; afterwards every module of
    ``model`` has its own training flag back, ``use_cache`` is as it was and the RNGs are where they were."""
    modes = [(m, m.training) for m in model.modules()]
    config = getattr(analysed, "config", None)
    cache = getattr(config, "use_cache", None)
    rng = _rng_state()
    try:
        analysed.eval()
        if isinstance(cache, bool):
            config.use_cache = False  # type: ignore[union-attr]
        with torch.no_grad():
            yield
    finally:
        for m, training in modes:
            m.training = training
        if isinstance(cache, bool):
            config.use_cache = cache  # type: ignore[union-attr]
        _set_rng_state(rng)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch (CPU and CUDA), NumPy and Python seeded with ``seed`` inside; their states restored after."""
    rng = _rng_state()
    try:
        torch.default_generator.manual_seed(seed)  # torch.manual_seed would queue a seed for CUDA too
        if _cuda_started():
            torch.cuda.manual_seed_all(seed)
        np.random.seed(seed % 2**32)  # noqa: NPY002 (the global state a collator draws from)
        random.seed(seed)
        yield
    finally:
        _set_rng_state(rng)


def first_samples(dataset: Any, count: int, what: str) -> list[Any]:
    """Samples ``0 … count-1`` of ``dataset`` in its order (an iterable dataset: its first ``count`` items);
    an empty one is one :class:`InputError` naming ``what`` (e.g. "the evaluation dataset")."""
    indexable = hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")
    if indexable and not isinstance(dataset, torch.utils.data.IterableDataset):
        samples = [dataset[i] for i in range(min(count, len(dataset)))]
    else:
        samples = list(itertools.islice(iter(dataset), count))
    if not samples:
        raise InputError(f"{what} is empty", "give it at least one sample")
    return samples
