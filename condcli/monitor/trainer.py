""":class:`ConditioningCallback`: a ``transformers.TrainerCallback`` that logs a :class:`Monitor`'s values.

How the values reach TensorBoard, W&B, CSV…: a callback is handed no Trainer, and a dict it adds in its own
``on_log`` comes too late (the ``report_to`` integrations come first in the callback list and have logged
by then). So at ``on_train_begin`` the callback finds the Trainer that is calling it (the frame whose
``self`` is a Trainer holding this callback) and logs with ``trainer.log(values)``, the Trainer's own way:
the values go into ``state.log_history`` with the step and through every callback's ``on_log`` — the
integrations (which write them under their own prefix, e.g. TensorBoard's ``train/condcli/kappa_x``) and
the progress printer. Each process measures its own replica; the integrations write on the main one.
"""

from __future__ import annotations

import inspect
import itertools
import sys
from collections.abc import Iterable
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from condcli.analysis.common import check_lambda
from condcli.errors import InputError, UsageError
from condcli.monitor.monitor import Monitor, check_count
from condcli.monitor.probe import seeded
from condcli.monitor.selection import select


def find_trainer(callback: TrainerCallback) -> Trainer:
    """The Trainer whose callback handler is calling ``callback`` now (found on the call stack)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            owner = frame.f_locals.get("self")
            if isinstance(owner, Trainer) and callback in owner.callback_handler.callbacks:
                return owner
            frame = frame.f_back
    finally:
        del frame
    raise UsageError(
        "ConditioningCallback was called outside a transformers Trainer's training loop",
        "pass it to the Trainer: `Trainer(..., callbacks=[ConditioningCallback()])` or trainer.add_callback",
    )


def probe_inputs(trainer: Trainer, max_samples: int, fallback: Any = None) -> Any:
    """The first ``max_samples`` samples of the eval dataset (the first of a dict), else of the train dataset,
    without the columns the Trainer removes, collated by the Trainer's ``data_collator``; torch, NumPy and
    Python seeded with ``args.seed`` for a collator that draws random numbers (MLM masking)."""
    dataset, description = trainer.eval_dataset, "Evaluation"
    if isinstance(dataset, dict):
        dataset = next(iter(dataset.values()), None)
    if dataset is None:
        dataset, description = trainer.train_dataset, "Training"
    collator = trainer.data_collator
    if dataset is None and fallback is not None:  # a Trainer that builds its own train dataloader
        dataset, collator = getattr(fallback, "dataset", None), getattr(fallback, "collate_fn", None)
    if dataset is None or collator is None:
        raise UsageError(
            "ConditioningCallback needs samples to measure: the Trainer has no eval or train dataset",
            "give the Trainer an eval_dataset (its first samples are the probe batch) or a train_dataset",
        )
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(dataset, datasets.Dataset):
        dataset = trainer._remove_unused_columns(dataset, description=description)
    elif collator is trainer.data_collator:
        collator = trainer._get_collator_with_removed_columns(collator, description=description)
    with seeded(trainer.args.seed):
        if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
            samples = list(itertools.islice(iter(dataset), max_samples))
        else:
            samples = [dataset[i] for i in range(min(max_samples, len(dataset)))]
        if not samples:
            raise InputError(f"the {description.lower()} dataset is empty", "give it at least one sample")
        return collator(samples)


class ConditioningCallback(TrainerCallback):  # type: ignore[misc]
    """Log κ(X), κ(X_l), μ(LA) and attention entropy (or ``metrics``) every ``every_n_steps`` optimizer
    steps and at the last step, measured on a fixed probe batch (:mod:`condcli.monitor` says which).

    ``layers``: indices (None: all). ``max_samples``: probe samples. ``metrics``: registry names.
    ``lam``: also log κ(X + λI_k). Training itself is not changed: the same seed gives the same weights.
    """

    def __init__(
        self,
        every_n_steps: int = 100,
        layers: Iterable[int] | None = None,
        max_samples: int = 16,
        metrics: Iterable[str] | str | None = None,
        lam: float | None = None,
    ) -> None:
        self.every_n_steps = check_count(every_n_steps, "every_n_steps", 100)
        self.max_samples = check_count(max_samples, "max_samples")
        self.layers = None if layers is None else list(layers)
        self.metrics = metrics if metrics is None or isinstance(metrics, str) else list(metrics)
        select(self.metrics, False)  # unknown names: one error now, not at the first step
        self.lam = None if lam is None else check_lambda(lam, "lam")
        self.monitor: Monitor | None = None
        self.probe: Any = None
        self._trainer: Trainer | None = None
        self._logged = -1  # the last step logged

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._trainer = find_trainer(self)
        model = kwargs.get("model")
        model = self._trainer.model if model is None else model
        self.monitor = Monitor(
            model, layers=self.layers, metrics=self.metrics, lam=self.lam, max_samples=self.max_samples
        )
        self.probe = probe_inputs(self._trainer, self.max_samples, kwargs.get("train_dataloader"))
        self._logged = -1

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        step = state.global_step
        if step % self.every_n_steps == 0 or step >= state.max_steps:
            self.log(state)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.log(state)  # training stopped before max_steps (early stopping): its last step too

    def log(self, state: TrainerState) -> None:
        """Measure now and log through the Trainer (once per step)."""
        if self.monitor is None or self._trainer is None or state.global_step == self._logged:
            return
        self._logged = state.global_step
        values = self.monitor.measure(self.probe)
        control = self._trainer.control
        due = control.should_log  # the Trainer's own log of this step, which its on_log would cancel
        self._trainer.log(values)
        self._trainer.control.should_log = due
