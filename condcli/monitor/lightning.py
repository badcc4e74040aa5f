""":class:`ConditioningLightningCallback`: the :class:`~condcli.monitor.trainer.ConditioningCallback` of
Lightning (``pip install condcli[lightning]``; without it, importing this module is one error saying so).

The network measured is the LightningModule's submodule ``module`` (default ``"model"``; None: the
LightningModule itself). The probe batch is ``probe`` (what that network takes: a dict of tensors or a
tensor), else the first ``max_samples`` samples of the validation dataloader's dataset (the first
dataloader), or of the training dataloader's, collated by that dataloader's ``collate_fn`` (with torch,
NumPy and Python seeded with 0), and where that gives a tuple or list, its first element (the
``(inputs, target)`` convention). Values are logged to every logger of the Trainer (``trainer.loggers``,
as Lightning's LearningRateMonitor logs) every ``every_n_steps`` optimizer steps and when training ends, at
step ``trainer.global_step``: the weights after that many optimizer steps (Lightning's own ``self.log`` of a
training batch uses the steps before it, one less).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from condcli.errors import UsageError


class MissingExtra(UsageError, ImportError):
    """An optional dependency is not installed."""


try:
    import lightning.pytorch as pl
except ImportError:
    raise MissingExtra(
        "the Lightning callback needs the lightning package, which is not installed",
        "pip install condcli[lightning]",
    ) from None

from condcli.monitor.monitor import CallbackSettings, Monitor  # noqa: E402
from condcli.monitor.probe import first_samples, seeded  # noqa: E402


def _first_loader(loaders: Any) -> Any:
    if loaders is None:
        return None
    if isinstance(loaders, dict):
        return next(iter(loaders.values()), None)
    if isinstance(loaders, list | tuple):
        return loaders[0] if loaders else None
    return loaders


def loader_probe(trainer: pl.Trainer, max_samples: int) -> Any:
    """The first ``max_samples`` samples of the validation (else training) dataloader's dataset, collated."""
    for loader in (_first_loader(trainer.val_dataloaders), _first_loader(trainer.train_dataloader)):
        dataset = getattr(loader, "dataset", None)
        if dataset is None:
            continue
        collate = getattr(loader, "collate_fn", None)
        with seeded(0):
            samples = first_samples(dataset, max_samples, "the dataloader's dataset")
            batch = collate(samples) if collate is not None else samples
        return batch[0] if isinstance(batch, tuple | list) else batch
    raise UsageError(
        "ConditioningLightningCallback found no dataloader with a dataset to take its probe batch from",
        "pass probe (a batch as the network takes it)",
    )


class ConditioningLightningCallback(pl.Callback):
    """Log κ(X), κ(X_l), μ(LA) and attention entropy (or ``metrics``) of ``module`` every ``every_n_steps``
    optimizer steps and at the end of training, on a fixed probe batch."""

    def __init__(
        self,
        every_n_steps: int = 100,
        layers: Iterable[int] | None = None,
        max_samples: int = 16,
        metrics: Iterable[str] | str | None = None,
        lam: float | None = None,
        *,
        probe: Any = None,
        module: str | None = "model",
    ) -> None:
        self.settings = CallbackSettings.checked(every_n_steps, layers, max_samples, metrics, lam)
        self.probe = probe
        self.module = module
        self.monitor: Monitor | None = None
        self._logged = -1

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        network: torch.nn.Module = pl_module
        if self.module is not None:
            try:
                network = pl_module.get_submodule(self.module)
            except AttributeError:
                raise UsageError(
                    f"module={self.module!r}: the LightningModule has no such submodule",
                    "name the attribute holding the network, or module=None for the LightningModule",
                ) from None
        self.monitor = self.settings.monitor(network)
        if self.probe is None:
            self.probe = loader_probe(trainer, self.settings.max_samples)
        self._logged = -1

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step % self.settings.every_n_steps == 0:
            self.log_now(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.log_now(trainer)

    def log_now(self, trainer: pl.Trainer) -> None:
        """Measure and log to every logger (once per optimizer step)."""
        step = trainer.global_step
        if self.monitor is None or step == self._logged or step == 0:
            return
        self._logged = step
        values = self.monitor.measure(self.probe)
        for logger in trainer.loggers:
            logger.log_metrics(values, step=step)
