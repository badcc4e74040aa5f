"""`make bench`: what ConditioningCallback adds to a training step (issue 20 target: ≤ 5% at every 100 steps).

Workload: a small BERT built from its config (d = 256, 4 layers, 4 heads, MLP 1024, vocab 1000: 4.4M
parameters) trained by the transformers Trainer with AdamW on random token ids of 64–128 tokens (right
padded, batch 16), the same run twice side by side: (a) plain, (b) with ``ConditioningCallback(
every_n_steps=100)`` (defaults: every layer, 16 probe samples, κ(X), κ(X_l), μ(LA), attention entropy).
Step time: the wall clock from the end of step 1 to the end of the last step (so (b) includes its
measurements at steps 100, 200, …, and at the last step), over the steps in between; the setup before step 1
(the callback's adapter and probe batch) is shown apart. Runs are interleaved (a, b, a, b, …) and the
median of ``repeats`` taken. On a shared machine the load drifts between runs by more than 5%, so (b) is
also judged against itself: its step time over its step time less its measurements' time (timed in the
callback). Device: the GPU if there is one (``--device``), else CPU.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import Dataset
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from bench.bench_spectrum import Verdict, machine, print_verdicts, ratio
from condcli.monitor import ConditioningCallback

TARGET = 1.05  # ≤ 5% more time per step


class Tokens(Dataset):  # type: ignore[type-arg]
    """``n`` samples of random token ids (1 … vocab−1) of ``lengths`` lo…hi tokens, each with a label of
    ``classes`` (also the tests' training data)."""

    def __init__(
        self, n: int, vocab: int, seed: int = 0, lengths: tuple[int, int] = (64, 128), classes: int = 2
    ) -> None:
        gen = torch.Generator().manual_seed(seed)
        lo, hi = lengths
        self.lengths = torch.randint(lo, hi + 1, (n,), generator=gen).tolist()
        self.ids = torch.randint(1, vocab, (n, hi), generator=gen)
        self.labels = torch.randint(0, classes, (n,), generator=gen).tolist()

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.ids[i, : self.lengths[i]].tolist(), "labels": self.labels[i]}


def pad_right(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    width = max(len(s["input_ids"]) for s in samples)
    rows = [s["input_ids"] for s in samples]
    return {
        "input_ids": torch.tensor([r + [0] * (width - len(r)) for r in rows]),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
        "labels": torch.tensor([s["labels"] for s in samples]),
    }


class TimedCallback(ConditioningCallback):  # type: ignore[misc]  # transformers' TrainerCallback is untyped
    """The callback, timing each of its measurements (with the log call that carries it)."""

    def __init__(self, every_n_steps: int) -> None:
        super().__init__(every_n_steps=every_n_steps)
        self.seconds: list[float] = []

    def log(self, state: Any) -> None:
        fresh = state.global_step != self._logged
        start = time.perf_counter()
        super().log(state)
        if fresh:
            self.seconds.append(time.perf_counter() - start)


class StepClock(TrainerCallback):  # type: ignore[misc]
    """Times from the end of step 1 to the end of the last step (last in the list: after the monitor)."""

    def __init__(self) -> None:
        self.begin = self.first = self.last = 0.0

    def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
        self.begin = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = self.last = time.perf_counter()
        if state.global_step == 1:
            self.first = now


def run(
    steps: int, every: int | None, device: str, batch_size: int, size: tuple[int, int] = (256, 4)
) -> tuple[float, float, float]:
    """Seconds per step after step 1, of the callback's measurements in them, and of setup and step 1."""
    torch.manual_seed(0)
    hidden, layers = size
    config = BertConfig(
        vocab_size=1000,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=4 * hidden,
        max_position_embeddings=128,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    clock = StepClock()
    callbacks: list[TrainerCallback] = [clock]
    monitor = TimedCallback(every) if every is not None else None
    if monitor is not None:
        callbacks.insert(0, monitor)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            out,
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            learning_rate=1e-4,
            logging_steps=50,
            report_to=[],
            save_strategy="no",
            disable_tqdm=True,
            use_cpu=device == "cpu",
            seed=0,
        )
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=Tokens(steps * batch_size, 1000),
            data_collator=pad_right,
            callbacks=callbacks,
        )
        trainer.remove_callback(PrinterCallback)  # the logs on stdout would cost time and hide the table
        trainer.train()
    measured = sum(monitor.seconds) if monitor is not None else 0.0
    return (clock.last - clock.first) / max(steps - 1, 1), measured, clock.first - clock.begin


def main(argv: Sequence[str] | None = None) -> list[Verdict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (the GPU if any, else CPU), cpu or cuda")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=100, help="the callback's every_n_steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=256, help="d of the BERT")
    parser.add_argument("--layers", type=int, default=4, help="blocks of the BERT")
    parser.add_argument("--warmup", type=int, default=3, help="steps of a first run not timed (0: none)")
    a = parser.parse_args(argv)
    size = (a.hidden, a.layers)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    print(f"bench_monitor: {machine()}; device {device}")
    shape = f"small BERT (d {a.hidden}, {a.layers} layers), batch {a.batch_size}"
    print(f"{shape}, {a.steps} steps, callback every {a.every}")
    if a.warmup:
        run(a.warmup, a.every, device, a.batch_size, size)  # imports, allocator, the adapter registry
    plain, watched, share, setup = [], [], [], []
    for _ in range(a.repeats):
        plain.append(run(a.steps, None, device, a.batch_size, size)[0])
        step, measured, begin = run(a.steps, a.every, device, a.batch_size, size)
        watched.append(step)
        total = step * max(a.steps - 1, 1)
        share.append(ratio(total, total - measured))  # (b) over (b) without its measurements: the same run
        setup.append(begin)
    p, w, inside = statistics.median(plain), statistics.median(watched), statistics.median(share)
    print(f"  (a) plain training step:                 {p * 1e3:8.1f} ms")
    print(f"  (b) with ConditioningCallback(every {a.every}): {w * 1e3:8.1f} ms   {ratio(w, p):.3f}x (a)")
    print(f"      (b) over its own steps without the measurements: {inside:.3f}x")
    print(f"      (b) setup and step 1 (adapter, probe batch, first step): {statistics.median(setup):.2f} s")
    verdicts = [
        Verdict(f"step time with the callback every {a.every} steps, (b)/(a)", ratio(w, p), TARGET),
        Verdict("the same, within run (b): its steps over its steps less the measurements", inside, TARGET),
    ]
    print_verdicts(verdicts)
    return verdicts


if __name__ == "__main__":
    main()
