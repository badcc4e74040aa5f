"""ConditioningCallback in a real transformers Trainer run of a tiny HF ViT (random images, CPU): it logs
every N steps and at the last, its last values equal a float64 recomputation on the final model's own
``hidden_states``/``attentions`` for the probe images, and the weights are bitwise those of the same run
without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset
from transformers import Trainer, ViTConfig, ViTForImageClassification

from condcli.monitor import ConditioningCallback
from tests.helpers import DTYPE_EPS, np_reported_kappa
from tests.test_monitor import np_entropy
from tests.test_monitor_trainer import training_args

STEPS, EVERY, PROBE = 12, 5, 4


class Images(Dataset):  # type: ignore[type-arg]
    """Random 32×32 RGB images with a label of 3 classes each."""

    def __init__(self, n: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.pixels = torch.randn(n, 3, 32, 32, generator=gen)
        self.labels = torch.randint(0, 3, (n,), generator=gen)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"pixel_values": self.pixels[i], "labels": self.labels[i]}


def train(folder: str, callback: ConditioningCallback | None) -> tuple[ViTForImageClassification, Trainer]:
    torch.manual_seed(0)
    config = ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, num_labels=3, attn_implementation="eager",
    )  # fmt: skip
    model = ViTForImageClassification(config)
    args = training_args(folder, STEPS)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Images(48, seed=0),
        eval_dataset=Images(8, seed=1),
        callbacks=[callback] if callback is not None else [],
    )
    trainer.train()
    return model, trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ViTForImageClassification, Trainer]]:
    callback = ConditioningCallback(every_n_steps=EVERY, max_samples=PROBE)
    return {
        "with": train(str(tmp_path_factory.mktemp("with")), callback),
        "without": train(str(tmp_path_factory.mktemp("without")), None),
    }


def test_a_vit_trains_bitwise_the_same_and_is_logged_every_n_steps_and_at_the_end(
    runs: dict[str, tuple[ViTForImageClassification, Trainer]],
) -> None:
    (a, trainer), (b, _) = runs["with"], runs["without"]
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert [h["step"] for h in trainer.state.log_history if "condcli/kappa_x" in h] == [5, 10, 12]


def test_the_vit_s_last_values_equal_its_hidden_states_and_attentions(
    runs: dict[str, tuple[ViTForImageClassification, Trainer]],
) -> None:
    model, trainer = runs["with"]
    last = next(h for h in trainer.state.log_history if h["step"] == STEPS and "condcli/kappa_x" in h)
    pixels = Images(8, seed=1).pixels[:PROBE]  # the eval set's first samples
    model.eval()
    with torch.no_grad():
        out = model.vit(pixel_values=pixels, output_hidden_states=True, output_attentions=True)
    eps = DTYPE_EPS["float32"]
    hidden = [h.double().numpy() for h in out.hidden_states]
    assert last["condcli/kappa_x"] == pytest.approx(np.median([np_reported_kappa(m, eps) for m in hidden[0]]))
    for i in (0, 1):
        want = np.median([np_reported_kappa(m, eps) for m in hidden[i]])
        assert last[f"condcli/layer_{i}/kappa"] == pytest.approx(want, rel=1e-6)
        entropy = np.median([np_entropy(p).min() for p in out.attentions[i].double().numpy()])
        assert last[f"condcli/layer_{i}/attention_entropy"] == pytest.approx(entropy, rel=1e-6)
