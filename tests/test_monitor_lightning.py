"""ConditioningLightningCallback in a real Lightning fit (tiny timm ViT with dropout, CPU, CSVLogger): the
values reach the logger's metrics.csv at the steps, equal a manual forward of the final model, and the
weights are bitwise those of the same fit without it."""

from __future__ import annotations

import csv
import importlib
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from condcli.errors import UsageError
from condcli.monitor.lightning import ConditioningLightningCallback
from tests.helpers import DTYPE_EPS, np_reported_kappa
from tests.test_monitor import timm_inputs, tiny_vit

STEPS = 12


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = tiny_vit(drop_rate=0.1, attn_drop_rate=0.1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def data() -> DataLoader:
    gen = torch.Generator().manual_seed(1)
    xs, ys = torch.randn(80, 3, 32, 32, generator=gen), torch.randint(0, 5, (80,), generator=gen)
    return DataLoader(
        TensorDataset(xs, ys), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(2)
    )


def fit(tmp: Path, callback: ConditioningLightningCallback | None) -> Classifier:
    pl.seed_everything(0, verbose=False)
    module = Classifier()
    trainer = pl.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        logger=CSVLogger(str(tmp), name="run", version=0),
        callbacks=[callback] if callback is not None else [],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        deterministic=True,
    )
    trainer.fit(module, train_dataloaders=data())
    return module


def test_lightning_logs_to_its_loggers_without_changing_training(tmp_path: Path) -> None:
    watched = fit(tmp_path / "with", ConditioningLightningCallback(every_n_steps=5, max_samples=4))
    plain = fit(tmp_path / "without", None)
    pairs = zip(watched.state_dict().values(), plain.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    with open(tmp_path / "with" / "run" / "version_0" / "metrics.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("condcli/kappa_x")]
    assert [int(r["step"]) for r in rows] == [5, 10, 12]
    assert {"condcli/layer_1/mu_la", "condcli/layer_0/attention_entropy"} <= set(rows[0])
    assert not [key for key in rows[0] if key.endswith("/floor")]  # no floor in this run: no floor series
    # the probe: the training dataloader's first 4 samples (dataset order), inputs of the (x, y) pairs
    probe = data().dataset.tensors[0][:4]
    x, inputs = timm_inputs(watched.model, probe)
    eps = DTYPE_EPS["float32"]
    want = np.median([np_reported_kappa(m, eps) for m in x.double().numpy()])
    assert float(rows[-1]["condcli/kappa_x"]) == pytest.approx(want, rel=1e-6)
    xl = inputs[1][0].double().numpy()
    want = np.median([np_reported_kappa(m, eps) for m in xl])
    assert float(rows[-1]["condcli/layer_1/kappa"]) == pytest.approx(want, rel=1e-6)


def test_a_missing_module_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="the LightningModule has no such submodule"):
        fit(tmp_path, ConditioningLightningCallback(module="net"))


def test_without_lightning_the_import_is_one_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("lightning", "lightning.pytorch"):
        monkeypatch.setitem(sys.modules, name, None)  # import lightning.pytorch now raises ImportError
    monkeypatch.delitem(sys.modules, "condcli.monitor.lightning")
    with pytest.raises(ImportError) as caught:
        importlib.import_module("condcli.monitor.lightning")
    assert isinstance(caught.value, UsageError)
    assert str(caught.value) == (
        "the Lightning callback needs the lightning package, which is not installed — "
        "pip install condcli[lightning]"
    )
