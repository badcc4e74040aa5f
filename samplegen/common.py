"""What every sample build shares: determinism, the schedule, atomic folder writes and the metadata file."""

from __future__ import annotations

import json
import math
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import torch

THREADS = 2  # fixed, so a rebuild on a bigger machine does the same float sums in the same order
METADATA = "metadata.json"


def deterministic(seed: int) -> None:
    """Seed torch and force deterministic kernels with a fixed thread count."""
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(THREADS)


def warmup_cosine(
    optimizer: torch.optim.Optimizer, warmup: int, total: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up for ``warmup`` steps, then cosine decay to 0 at ``total``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def adamw(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on biases, norms, embeddings of size 1)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98))


class Schedule(Protocol):
    """The fields of a recipe that decide how it is trained (VitRecipe and LmRecipe both have them)."""

    @property
    def epochs(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def weight_decay(self) -> float: ...
    @property
    def warmup_steps(self) -> int: ...
    @property
    def seed(self) -> int: ...  # also orders the batches


def fit(
    model: torch.nn.Module,
    count: int,
    batch_loss: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
    schedule: Schedule,
    log: Callable[[str], None],
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train for ``schedule.epochs`` over ``count`` examples, each epoch in a new seeded random order.

    ``batch_loss(indices, generator)`` gives the loss of one batch; it may draw from ``generator`` (BERT's
    masks), which is the one that orders the batches. ``on_step(step, loss)`` is called after each
    optimizer step (step counts from 1). Returns steps, train loss per epoch and seconds.
    """
    epochs, size = schedule.epochs, schedule.batch_size
    per_epoch = math.ceil(count / size)
    total = epochs * per_epoch
    opt = adamw(model, schedule.lr, schedule.weight_decay)
    sched = warmup_cosine(opt, schedule.warmup_steps, total)
    order = torch.Generator().manual_seed(schedule.seed)
    start, curve = time.perf_counter(), []
    for epoch in range(epochs):
        model.train()
        perm, running = torch.randperm(count, generator=order), 0.0
        for step in range(per_epoch):
            loss = batch_loss(perm[step * size : (step + 1) * size], order)
            opt.zero_grad(set_to_none=True)
            torch.autograd.backward(loss)
            opt.step()
            sched.step()
            running += float(loss.detach())
            if on_step is not None:
                on_step(epoch * per_epoch + step + 1, float(loss.detach()))
        curve.append(round(running / per_epoch, 4))
        log(f"  epoch {epoch + 1}/{epochs}: train loss {curve[-1]:.4f}")
    return {"steps": total, "train_loss_per_epoch": curve, "seconds": round(time.perf_counter() - start, 1)}


def versions() -> dict[str, str]:
    import timm
    import tokenizers
    import transformers

    import condcli

    return {
        "condcli": condcli.__version__,
        "torch": torch.__version__,
        "timm": timm.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
    }


@contextmanager
def atomic_folder(target: Path) -> Iterator[Path]:
    """Write into a temporary sibling folder; replace ``target`` only when everything was written."""
    tmp = target.with_name(f".{target.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


def write_metadata(folder: Path, data: dict[str, Any]) -> None:
    (folder / METADATA).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
