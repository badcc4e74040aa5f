"""Monitor in a plain training loop (tiny timm ViT with dropout, CPU): training is bitwise unchanged, every
module's training flag, the RNGs, the gradients and the hooks are as they were; bad input is one error."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2Model, ViTConfig, ViTForImageClassification

from condcli.errors import InputError, UsageError
from condcli.monitor import Monitor
from tests.helpers import DTYPE_EPS, np_reported_kappa
from tests.recording import hook_count
from tests.test_monitor import text_batch, timm_inputs, tiny_bert, tiny_vit

EPS32 = DTYPE_EPS["float32"]


def loop(monitor_every: int | None, steps: int = 12) -> tuple[torch.nn.Module, list, torch.Tensor]:
    """A few dozen AdamW steps; dropout everywhere, so any RNG the monitor drew would change the weights."""
    torch.manual_seed(0)
    model = tiny_vit(drop_rate=0.1, proj_drop_rate=0.1, attn_drop_rate=0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    monitor = Monitor(model, max_samples=4) if monitor_every else None
    gen = torch.Generator().manual_seed(1)
    probe = torch.randn(4, 3, 32, 32, generator=gen)
    logs = []
    model.train()
    model.patch_embed.eval()  # a mixed state: each module's own flag must come back
    for step in range(1, steps + 1):
        x, y = torch.randn(8, 3, 32, 32, generator=gen), torch.randint(0, 5, (8,), generator=gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if monitor is not None and monitor_every and (step % monitor_every == 0 or step == steps):
            grads = [p.grad.clone() for p in model.parameters()]
            modes = [m.training for m in model.modules()]
            hooks = hook_count(model)
            rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())  # noqa: NPY002
            logs.append(monitor.measure(probe))
            assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters(), strict=True))
            assert [m.training for m in model.modules()] == modes
            assert hook_count(model) == hooks == 0
            assert torch.equal(torch.get_rng_state(), rng[0])
            assert np.array_equal(np.random.get_state()[1], rng[1])  # noqa: NPY002
            assert random.getstate() == rng[2]
    return model, logs, probe


def test_a_plain_loop_trains_bitwise_the_same_and_the_last_values_match_the_final_model() -> None:
    watched, logs, probe = loop(monitor_every=5)
    plain, _, _ = loop(monitor_every=None)
    pairs = zip(watched.state_dict().values(), plain.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    assert len(logs) == 3  # steps 5, 10 and the last
    x, inputs = timm_inputs(watched, probe)
    assert logs[-1]["condcli/kappa_x"] == pytest.approx(
        np.median([np_reported_kappa(m, EPS32) for m in x.double().numpy()]), rel=1e-6
    )
    for i, (xl, _) in enumerate(inputs):
        want = np.median([np_reported_kappa(m, EPS32) for m in xl.double().numpy()])
        assert logs[-1][f"condcli/layer_{i}/kappa"] == pytest.approx(want, rel=1e-6)
    assert logs[0]["condcli/kappa_x"] != logs[-1]["condcli/kappa_x"]  # it watches the model move


def test_hf_vit_pixel_values_and_gpt2_use_cache_left_as_found() -> None:
    torch.manual_seed(0)
    config = ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, num_labels=3,
    )  # fmt: skip
    vit = ViTForImageClassification(config)
    pixels = torch.randn(3, 3, 32, 32)
    got = Monitor(vit, metrics=["kappa"]).measure({"pixel_values": pixels, "labels": torch.zeros(3).long()})
    vit.eval()
    with torch.no_grad():
        hidden = vit.vit(pixel_values=pixels, output_hidden_states=True).hidden_states
    for key, h in (("condcli/kappa_x", hidden[0]), ("condcli/layer_1/kappa", hidden[1])):
        want = np.median([np_reported_kappa(m, EPS32) for m in h.double().numpy()])
        assert got[key] == pytest.approx(want, rel=1e-6)
    gpt2 = GPT2Model(GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50, n_positions=32))
    assert gpt2.config.use_cache is True
    Monitor(gpt2).measure(torch.randint(0, 50, (2, 9)))
    assert gpt2.config.use_cache is True


def test_the_model_s_own_shift_is_logged_with_its_lambda() -> None:
    from condcli.adapters import condition_model

    model = tiny_bert()
    inner = model.bert.embeddings
    condition_model(model, lam=5.0)
    batch = text_batch([7, 5, 9])
    got = Monitor(model, metrics=["kappa"], layers=[]).measure(batch)
    model.eval()
    with torch.no_grad():
        x = inner(input_ids=batch["input_ids"])  # X before the model's own shift
    lengths = batch["attention_mask"].sum(1).tolist()
    mats = [x[b, :n].double().numpy() for b, n in enumerate(lengths)]
    shifted = [np.linalg.cond(m + 5.0 * np.eye(*m.shape)) for m in mats]
    assert got["condcli/kappa_x_conditioned"] == pytest.approx(np.median(shifted), rel=1e-6)


@pytest.mark.parametrize(
    ("build", "batch", "error", "says"),
    [
        (lambda m: Monitor("bert"), None, UsageError, "model must be a torch nn.Module"),  # type: ignore[arg-type]
        (
            lambda m: Monitor(m, layers=[7]),
            None,
            InputError,
            "layers asks for a layer this model does not have",
        ),
        (lambda m: Monitor(m, layers=3), None, UsageError, "layers must be a list of layer indices"),
        (lambda m: Monitor(m, metrics=["mu"]), None, InputError, "unknown metric(s) 'mu'"),
        (lambda m: Monitor(m, lam=-1.0), None, InputError, "lam must be a finite number ≥ 0"),
        (lambda m: Monitor(m, max_samples=0), None, UsageError, "max_samples must be an integer ≥ 1"),
        (Monitor, [1, 2], UsageError, "batch must be a dict of tensors or a tensor, got list"),
        (Monitor, {"pixel_values": torch.zeros(2, 3)}, InputError, "batch has no 'input_ids'"),
        (Monitor, {"input_ids": torch.ones(0, 4).long()}, InputError, "batch holds no samples"),
        (
            Monitor,
            {"input_ids": torch.ones(2, 4).long(), "attention_mask": torch.ones(3, 4).long()},
            InputError,
            "attention_mask do not have the 2 samples",
        ),
        (
            Monitor,
            {
                "input_ids": torch.ones(2, 4).long(),
                "attention_mask": torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]),
            },
            InputError,
            "batch is not padded on the right",
        ),
        (
            Monitor,
            {
                "input_ids": torch.ones(2, 4).long(),
                "attention_mask": torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1]]),
            },
            InputError,
            "a sample with no tokens",
        ),
    ],
)
def test_bad_input_is_one_clear_error(build: Any, batch: Any, error: type, says: str) -> None:
    model = tiny_bert()
    with pytest.raises(error) as caught:
        build(model).measure(batch)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)
    assert hook_count(model) == 0
