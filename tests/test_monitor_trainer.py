"""ConditioningCallback in a real transformers Trainer run (tiny BERT from a config, random token data of
unequal lengths, CPU): values reach a callback ahead of it in the list (where report_to's integrations
are), equal a float64 recomputation on the final model, and training is bitwise unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from bench.bench_monitor import Tokens as BenchTokens
from bench.bench_monitor import pad_right
from condcli.errors import InputError, UsageError
from condcli.monitor import ConditioningCallback
from tests.helpers import DTYPE_EPS, np_reported_kappa, np_shifted_kappa
from tests.test_monitor import bert_reference, np_entropy, tiny_bert

STEPS, EVERY, PROBE = 24, 10, 6


def Tokens(n: int, seed: int) -> BenchTokens:
    """Random token ids of lengths 3…16, with a label of 3 classes each."""
    return BenchTokens(n, 97, seed, lengths=(3, 16), classes=3)


class Recorder(TrainerCallback):  # type: ignore[misc]
    """What an integration sees: every on_log call with its step."""

    def __init__(self) -> None:
        self.logs: list[tuple[int, dict[str, float]]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        self.logs.append((state.global_step, dict(logs)))


def training_args(folder: str, steps: int, **more: Any) -> TrainingArguments:
    """A short, seeded CPU run of batch 8 that reports to no integration and saves nothing."""
    return TrainingArguments(
        folder,
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        report_to=[],
        seed=0,
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        **more,
    )


def train(tmp_path: Any, callback: ConditioningCallback | None, eval_dataset: Any = "tokens") -> tuple:
    model = tiny_bert(seed=0, layers=2)
    recorder = Recorder()
    args = training_args(str(tmp_path), STEPS, logging_steps=5)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Tokens(64, seed=0),
        eval_dataset=Tokens(10, seed=1) if eval_dataset == "tokens" else eval_dataset,
        data_collator=pad_right,
        callbacks=[recorder] + ([callback] if callback is not None else []),  # recorder first: before ours
    )
    trainer.train()
    return model, recorder, trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    watched = train(
        tmp_path_factory.mktemp("with"), ConditioningCallback(every_n_steps=EVERY, max_samples=PROBE, lam=3.0)
    )
    plain = train(tmp_path_factory.mktemp("without"), None)
    return {"with": watched, "without": plain}


def test_the_same_seed_gives_bitwise_the_same_weights_and_training_logs(runs: dict[str, tuple]) -> None:
    (a, rec_a, _), (b, rec_b, _) = runs["with"], runs["without"]
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    own = [(s, log) for s, log in rec_a.logs if not any(k.startswith("condcli/") for k in log)]
    assert [s for s, _ in own] == [s for s, _ in rec_b.logs]  # the Trainer's own logs all still there
    for (_, x), (_, y) in zip(own, rec_b.logs, strict=True):
        assert {k: v for k, v in x.items() if "runtime" not in k and "per_second" not in k} == {
            k: v for k, v in y.items() if "runtime" not in k and "per_second" not in k
        }


def test_values_reach_the_callbacks_ahead_of_it_every_n_steps_and_at_the_end(runs: dict[str, tuple]) -> None:
    _, recorder, trainer = runs["with"]
    steps = [s for s, log in recorder.logs if "condcli/kappa_x" in log]
    assert steps == [10, 20, 24]
    history = [h["step"] for h in trainer.state.log_history if "condcli/kappa_x" in h]
    assert history == steps  # state.log_history too (trainer_state.json, what `condcli track` reads)
    last = next(log for s, log in recorder.logs if s == STEPS and "condcli/kappa_x" in log)
    keys = {k for k in last if k.startswith("condcli/")}
    per_layer = {f"condcli/layer_{i}/{m}" for i in (0, 1) for m in ("kappa", "mu_la", "attention_entropy")}
    # no floor here (every X is resolved in float32): no `/floor` series is logged at all
    assert keys == {"condcli/kappa_x", "condcli/kappa_x_conditioned"} | per_layer


def test_the_last_values_equal_a_recomputation_on_the_final_model(runs: dict[str, tuple]) -> None:
    model, recorder, _ = runs["with"]
    last = next(log for s, log in recorder.logs if s == STEPS and "condcli/kappa_x" in log)
    probe = pad_right([Tokens(10, seed=1)[i] for i in range(PROBE)])  # the eval set's first samples
    assert len(set(probe["attention_mask"].sum(1).tolist())) > 1  # unequal lengths: padding is cut
    ref = bert_reference(model, probe, PROBE)
    eps = DTYPE_EPS["float32"]
    x = ref["hidden"][0]
    assert last["condcli/kappa_x"] == pytest.approx(
        np.median([np_reported_kappa(m, eps) for m in x]), rel=1e-6
    )
    assert last["condcli/kappa_x_conditioned"] == pytest.approx(
        np.median([np_shifted_kappa(m, 3.0) for m in x]), rel=1e-6
    )
    for i in (0, 1):
        want = np.median([np_reported_kappa(m, eps) for m in ref["hidden"][i]])
        assert last[f"condcli/layer_{i}/kappa"] == pytest.approx(want, rel=1e-6)
        entropy = np.median([np_entropy(p).min() for p in ref["attentions"][i]])
        assert last[f"condcli/layer_{i}/attention_entropy"] == pytest.approx(entropy, rel=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"every_n_steps": 0}, UsageError, "every_n_steps must be an integer ≥ 1"),
        ({"every_n_steps": 2.5}, UsageError, "every_n_steps must be an integer ≥ 1"),
        ({"max_samples": -1}, UsageError, "max_samples must be an integer ≥ 1"),
        ({"metrics": ["kappa", "kapa"]}, InputError, "unknown metric(s) 'kapa'"),
        ({"metrics": []}, UsageError, "metrics is empty"),
        ({"lam": float("nan")}, InputError, "lam must be a finite number ≥ 0"),
    ],
)
def test_bad_arguments_are_one_clear_error(kwargs: dict[str, Any], error: type, says: str) -> None:
    with pytest.raises(error) as caught:
        ConditioningCallback(**kwargs)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unknown_metric_lists_the_valid_names() -> None:
    names = r"the metrics are: kappa, kappa_distinct, kappa_conditioned, .*attention_entropy"
    with pytest.raises(InputError, match=names):
        ConditioningCallback(metrics="entropy")


def test_an_empty_dataset_and_a_call_outside_a_trainer_are_one_clear_error(tmp_path: Any) -> None:
    with pytest.raises(InputError, match="the evaluation dataset is empty"):
        train(tmp_path, ConditioningCallback(every_n_steps=5), eval_dataset=[])
    with pytest.raises(UsageError, match="outside a transformers Trainer"):
        ConditioningCallback().on_train_begin(None, None, None, model=tiny_bert())
