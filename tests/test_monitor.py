"""condcli.monitor.Monitor: every logged value equals a float64 NumPy recomputation from the model's own
tensors (hidden_states, output_attentions, the weights, a manual timm forward), padding cut per sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
import timm
import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

from condcli.monitor import Monitor
from tests.helpers import DTYPE_EPS, np_kappa, np_reported_kappa, np_shifted_kappa

EPS32 = DTYPE_EPS["float32"]


def tiny_bert(seed: int = 0, layers: int = 3) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=3,
    )
    return BertForSequenceClassification(config)


def text_batch(lengths: list[int], width: int = 14, seed: int = 1) -> dict[str, torch.Tensor]:
    """Right-padded random token ids of unequal lengths, with their mask and labels."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 97, (len(lengths), width), generator=gen)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return {
        "input_ids": ids * mask,
        "attention_mask": mask,
        "labels": torch.zeros(len(lengths), dtype=torch.long),
    }


def bert_reference(model: BertForSequenceClassification, batch: dict[str, torch.Tensor], count: int) -> dict:
    """hidden_states and attentions of the eager forward, per sample cut to its real tokens, float64."""
    model.eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model.bert(
            input_ids=batch["input_ids"][:count],
            attention_mask=batch["attention_mask"][:count],
            output_hidden_states=True,
            output_attentions=True,
        )
    lengths = batch["attention_mask"][:count].sum(1).tolist()
    hs = [[h[b, :n].double().numpy() for b, n in enumerate(lengths)] for h in out.hidden_states]
    att = [[a[b, :, :n, :n].double().numpy() for b, n in enumerate(lengths)] for a in out.attentions]
    return {"hidden": hs, "attentions": att, "lengths": lengths}


def np_head_kappas(layer) -> np.ndarray:
    """(3, H) κ of each head's d × d_h slice of W_Q, W_K, W_V (right-multiplying: weight.T)."""
    attn = layer.attention.self
    H = attn.num_attention_heads
    out = []
    for lin in (attn.query, attn.key, attn.value):
        w = lin.weight.detach().double().numpy().T  # d × (H·d_h)
        out.append([np_kappa(s) for s in np.split(w, H, axis=1)])
    return np.array(out)


def np_entropy(p: np.ndarray) -> np.ndarray:
    """(H, n, n) → (H,): mean over queries of −Σ p log p / log n."""
    n = p.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(-1)
    return h.mean(-1) / np.log(n)


def test_bert_values_match_hidden_states_and_attentions_with_padding() -> None:
    model = tiny_bert()
    batch = text_batch([14, 9, 5, 11, 3, 7])
    got = Monitor(model, lam=4.0, max_samples=5).measure(batch)
    ref = bert_reference(model, batch, 5)
    x = ref["hidden"][0]
    assert got["condcli/kappa_x"] == pytest.approx(
        np.median([np_reported_kappa(m, EPS32) for m in x]), rel=1e-6
    )
    assert "condcli/kappa_x/floor" not in got  # a measurement, not a floor: no floor series at all
    want = np.median([np_shifted_kappa(m, 4.0) for m in x])
    assert got["condcli/kappa_x_conditioned"] == pytest.approx(want, rel=1e-6)
    for i, layer in enumerate(model.bert.encoder.layer):
        xl = ref["hidden"][i]  # post-norm BERT: X_l is also A_l
        kappas = np.array([np_reported_kappa(m, EPS32) for m in xl])
        assert got[f"condcli/layer_{i}/kappa"] == pytest.approx(np.median(kappas), rel=1e-6)
        w = np_head_kappas(layer).prod(0)  # (H,)
        mu = np.median([(w * k**3).max() for k in kappas])
        assert got[f"condcli/layer_{i}/mu_la"] == pytest.approx(mu, rel=1e-5)
        entropy = np.median([np_entropy(p).min() for p in ref["attentions"][i]])
        assert got[f"condcli/layer_{i}/attention_entropy"] == pytest.approx(entropy, rel=1e-6)
    # without the cut to real tokens κ(X) would differ: the padded rows are embeddings too
    padded = [batch_x for batch_x in _padded_x(model, batch, 5)]
    assert np.median([np_kappa(m) for m in padded]) != pytest.approx(got["condcli/kappa_x"], rel=1e-3)


def _padded_x(model: BertForSequenceClassification, batch: dict[str, torch.Tensor], count: int) -> list:
    with torch.no_grad():
        h = model.bert(input_ids=batch["input_ids"][:count], output_hidden_states=True).hidden_states[0]
    return [m.double().numpy() for m in h]


def test_keys_follow_metrics_and_layers() -> None:
    model = tiny_bert()
    monitor = Monitor(model, metrics=["kappa_attn_input", "kappa_wq", "stable_rank"], layers=[-1])
    got = monitor.measure(text_batch([6, 4]))
    assert list(got) == [
        "condcli/layer_2/kappa_wq",
        "condcli/layer_2/kappa_attn_input",
        "condcli/layer_2/stable_rank",
    ]
    # keys() lists every key measure can give: a floor key too, which comes only with a floor
    assert monitor.keys() == [*list(got)[:2], "condcli/layer_2/kappa_attn_input/floor", list(got)[2]]
    wq = model.bert.encoder.layer[2].attention.self.query.weight.detach().double().numpy().T
    assert got["condcli/layer_2/kappa_wq"] == pytest.approx(np_kappa(wq), rel=1e-6)
    ref = bert_reference(model, text_batch([6, 4]), 2)["hidden"][2]
    srank = [(s**2).sum() / s[0] ** 2 for s in (np.linalg.svd(m, compute_uv=False) for m in ref)]
    assert got["condcli/layer_2/stable_rank"] == pytest.approx(np.median(srank), rel=1e-6)
    only_x = Monitor(model, metrics="kappa", layers=[]).measure(text_batch([6, 4]))
    assert list(only_x) == ["condcli/kappa_x"]


def test_identical_rows_are_inf_exactly_and_not_a_floor() -> None:
    """Every token the same and no position/type signal: X has identical rows, so κ(X) = inf exactly
    (repeated rows, docs/math.md#repeated-rows): no floor key, since it is not a rounding floor."""
    model = tiny_bert()
    emb = model.bert.embeddings
    with torch.no_grad():
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
    batch = {"input_ids": torch.full((3, 8), 5), "attention_mask": torch.ones(3, 8, dtype=torch.long)}
    got = Monitor(model, metrics=["kappa"], layers=[0]).measure(batch)
    assert got["condcli/kappa_x"] == math.inf and got["condcli/layer_0/kappa"] == math.inf
    assert "condcli/kappa_x/floor" not in got and "condcli/layer_0/kappa/floor" not in got


def test_a_low_rank_x_is_logged_as_its_floor() -> None:
    """Eight distinct tokens whose embeddings span a plane and no position/type signal: after the LayerNorm
    (centre, scale, affine) X has distinct rows of rank ≤ 4 < k = 8, below float32's resolution, so κ(X) is
    the floor σ_1/tol and its floor key is 1."""
    model = tiny_bert()
    emb = model.bert.embeddings
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        plane = torch.randn(2, emb.word_embeddings.weight.shape[1], generator=g)
        emb.word_embeddings.weight[1:9] = torch.randn(8, 2, generator=g) @ plane
    ids = torch.arange(1, 9).repeat(3, 1)
    batch = {"input_ids": ids, "attention_mask": torch.ones(3, 8, dtype=torch.long)}
    got = Monitor(model, metrics=["kappa"], layers=[0]).measure(batch)
    x = bert_reference(model, batch, 3)["hidden"][0]
    assert got["condcli/kappa_x"] == pytest.approx(
        np.median([np_reported_kappa(m, EPS32) for m in x]), rel=1e-6
    )
    assert got["condcli/kappa_x/floor"] == 1.0
    assert got["condcli/layer_0/kappa/floor"] == 1.0


def test_layer_keys_are_zero_padded_to_the_layer_count_and_sort_in_layer_order() -> None:
    """A 12-layer model: layer_02 … layer_11, in layer order as text sorts them; each value is its own
    layer's (against hidden_states of that layer)."""
    model = tiny_bert(layers=12)
    batch = text_batch([9, 6, 4])
    got = Monitor(model, metrics=["kappa"], layers=[2, 10, 11]).measure(batch)
    layer_keys = [k for k in got if k.startswith("condcli/layer_")]
    assert layer_keys == ["condcli/layer_02/kappa", "condcli/layer_10/kappa", "condcli/layer_11/kappa"]
    assert sorted(layer_keys) == layer_keys
    hidden = bert_reference(model, batch, 3)["hidden"]
    for i in (2, 10, 11):
        want = np.median([np_reported_kappa(m, EPS32) for m in hidden[i]])
        assert got[f"condcli/layer_{i:02d}/kappa"] == pytest.approx(want, rel=1e-6)
    # fewer than 10 layers: one digit, as before
    small = Monitor(tiny_bert(layers=3), metrics=["kappa"], layers=[1]).measure(batch)
    assert [k for k in small if k.startswith("condcli/layer_")] == ["condcli/layer_1/kappa"]


def tiny_vit(**kwargs: float) -> nn.Module:
    return timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2, num_classes=5, **kwargs
    )


def timm_inputs(model: nn.Module, pixels: torch.Tensor) -> tuple[torch.Tensor, list]:
    """X (the output of pos_drop, docs/math.md#x) and each block's (X_l, A_l) by a manual eval forward."""
    model.eval()
    with torch.no_grad():
        x = model._pos_embed(model.patch_embed(pixels))
        h, inputs = model.norm_pre(model.patch_drop(x)), []
        for block in model.blocks:
            inputs.append((h, block.norm1(h)))  # X_l and the attention input A_l (pre-norm)
            h = block(h)
    return x, inputs


def test_timm_vit_tensor_batch_matches_a_manual_forward() -> None:
    torch.manual_seed(0)
    model = tiny_vit()
    pixels = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    got = Monitor(model, max_samples=4).measure(pixels)
    x, inputs = timm_inputs(model, pixels[:4])
    kx = [np_reported_kappa(m, EPS32) for m in x.double().numpy()]
    assert got["condcli/kappa_x"] == pytest.approx(np.median(kx), rel=1e-6)
    for i, (xl, al) in enumerate(inputs):
        k = [np_reported_kappa(m, EPS32) for m in xl.double().numpy()]
        assert got[f"condcli/layer_{i}/kappa"] == pytest.approx(np.median(k), rel=1e-6)
        attn = model.blocks[i].attn
        w = attn.qkv.weight.detach().double().numpy().T  # d × 3d, [Q|K|V], heads contiguous
        heads = np.array(
            [[np_kappa(s) for s in np.split(part, attn.num_heads, axis=1)] for part in np.split(w, 3, 1)]
        )
        ka = [np_reported_kappa(m, EPS32) for m in al.double().numpy()]
        mu = np.median([(heads.prod(0) * k**3).max() for k in ka])
        assert got[f"condcli/layer_{i}/mu_la"] == pytest.approx(mu, rel=1e-5)
        with torch.no_grad():
            qkv = attn.qkv(al).reshape(4, -1, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
            p = torch.softmax(qkv[0] @ qkv[1].transpose(-2, -1) * attn.scale, -1).double().numpy()
        entropy = np.median([np_entropy(s).min() for s in p])
        assert got[f"condcli/layer_{i}/attention_entropy"] == pytest.approx(entropy, rel=1e-5)
