""":class:`ConditioningCallback`: a ``transformers.TrainerCallback`` that logs a :class:`Monitor`'s values.

How the values reach TensorBoard, W&B, CSV…: a callback is handed no Trainer, and a dict it adds in its own
``on_log`` comes too late (the ``report_to`` integrations come first in the callback list and have logged
by then). So at ``on_train_begin`` the callback finds the Trainer that is calling it (the frame whose
``self`` is a Trainer holding this callback) and logs with ``trainer.log(values)``, the Trainer's own way:
the values go into ``state.log_history`` with the step and through every callback's ``on_log`` — the
integrations (which write them under their own prefix, e.g. TensorBoard's ``train/condcli/kappa_x``) and
the progress printer. Each process measures its own replica; the integrations write on the main one.

**The probe batch on disk.** So that ``condcli track`` measures what the callback measured, the main process
(``args.should_save``) saves the probe batch as ``condcli_probe.safetensors``
(:mod:`condcli.analysis.track_probe`): into ``args.output_dir`` when training begins, and into each
checkpoint folder (``checkpoint-STEP``) as the Trainer saves it, so a checkpoint copied elsewhere keeps it.
It holds what the callback feeds the analysed module (its first ``max_samples`` samples, the keys that
module reads; a few kB for text). ``condcli track`` on those folders with no ``text`` or ``images`` reads
it and reports, at each checkpoint's step, the values logged at that step. A file that cannot be written
is a warning; training goes on.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from condcli.errors import CondcliError, UsageError
from condcli.monitor.monitor import CallbackSettings, Monitor
from condcli.monitor.probe import first_samples, seeded


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
        return collator(first_samples(dataset, max_samples, f"the {description.lower()} dataset"))


def probe_source(trainer: Trainer) -> str:
    """Where :func:`probe_inputs` takes the probe samples from, in words."""
    dataset = trainer.eval_dataset
    if isinstance(dataset, dict):
        dataset = next(iter(dataset.values()), None)
    return "the evaluation dataset" if dataset is not None else "the training dataset"


def save_probe_file(folder: str | None, data: bytes) -> None:
    """``data`` as the probe file in ``folder``; a failure is a warning (training goes on)."""
    from condcli.analysis.track_probe import save_probe

    if folder is None or not data:
        return
    try:
        save_probe(Path(folder), data)
    except CondcliError as e:
        warnings.warn(f"condcli: the probe batch was not saved: {e}", stacklevel=2)


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
        self.settings = CallbackSettings.checked(every_n_steps, layers, max_samples, metrics, lam)
        self.monitor: Monitor | None = None
        self.probe: Any = None
        self._trainer: Trainer | None = None
        self._logged = -1  # the last step logged
        self._probe_file = b""  # the probe batch as saved beside the checkpoints

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._trainer = find_trainer(self)
        model = kwargs.get("model")
        model = self._trainer.model if model is None else model
        self.monitor = self.settings.monitor(model)
        self.probe = probe_inputs(self._trainer, self.settings.max_samples, kwargs.get("train_dataloader"))
        self._logged = -1
        self._probe_file = self.monitor.probe_file(self.probe, probe_source(self._trainer))
        if args.should_save:
            save_probe_file(args.output_dir, self._probe_file)

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """The probe batch into the checkpoint folder the Trainer has just saved."""
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        if not args.should_save or args.output_dir is None:
            return
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if folder.is_dir():
            save_probe_file(str(folder), self._probe_file)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        step = state.global_step
        if step % self.settings.every_n_steps == 0 or step >= state.max_steps:
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
