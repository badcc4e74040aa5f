"""Fused Q/K/V projections split the way each family splits them (docs/math.md#layers): Phi-3 `qkv_proj` under
grouped-query attention, GPT-NeoX and Bloom `query_key_value` interleaved per head, Falcon's multi-query,
multi-head and new-decoder-architecture layouts. References: the module's own weight rows and the family's
own split of the projection's output; P against output_attentions under eager attention."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import Result
from torch import Tensor, nn

from condcli.adapters import adapter_for
from condcli.capture import capture
from condcli.inputs.batches import Batch

D, H, DH, T = 32, 4, 8, 7
Split = Callable[[nn.Module, Tensor], tuple[Tensor, Tensor, Tensor]]  # (B, T, heads, d_h) each


def _phi3_split(attn: Any, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Phi3Attention.forward: qkv[..., :query_pos], then the next H_kv·d_h rows, then the rest."""
    query_pos = attn.config.num_attention_heads * attn.head_dim
    kv = attn.num_key_value_heads * attn.head_dim
    q, k, v = out[..., :query_pos], out[..., query_pos : query_pos + kv], out[..., query_pos + kv :]
    return tuple(t.unflatten(-1, (-1, attn.head_dim)) for t in (q, k, v))  # type: ignore[return-value]


def _neox_split(attn: Any, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """GPTNeoXAttention.forward: view(..., -1, 3·head_size).chunk(3, dim=-1)."""
    q, k, v = out.view(*out.shape[:-1], -1, 3 * attn.head_size).chunk(3, dim=-1)
    return q, k, v


def _falcon_split(attn: Any, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    q, k, v = attn._split_heads(out)  # the model's own method
    return q, k, v


def _bloom_split(attn: Any, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    q, k, v = attn._reshape(out)  # the model's own method, (B, H, T, d_h)
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


def _config(name: str) -> Any:
    import transformers as tf

    small = {"vocab_size": 64, "hidden_size": D, "num_attention_heads": H}
    if name == "phi3":
        return tf.Phi3Config(
            **small,
            intermediate_size=64,
            num_hidden_layers=2,
            num_key_value_heads=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        )
    if name == "neox":
        return tf.GPTNeoXConfig(**small, intermediate_size=64, num_hidden_layers=2)
    if name == "bloom":
        return tf.BloomConfig(vocab_size=64, hidden_size=D, n_layer=2, n_head=H)
    falcon = {
        "falcon_mq": {"multi_query": True, "new_decoder_architecture": False},
        "falcon_mh": {"multi_query": False, "new_decoder_architecture": False},
        "falcon_new": {"num_kv_heads": 2, "new_decoder_architecture": True},
        "falcon_alibi": {"multi_query": True, "alibi": True},
    }[name]
    return tf.FalconConfig(**small, num_hidden_layers=2, **falcon)


CASES: dict[str, tuple[Split, int]] = {  # name: (the family's split, KV heads)
    "phi3": (_phi3_split, 2),
    "neox": (_neox_split, H),
    "bloom": (_bloom_split, H),
    "falcon_mq": (_falcon_split, 1),
    "falcon_mh": (_falcon_split, H),
    "falcon_new": (_falcon_split, 2),
    "falcon_alibi": (_falcon_split, 1),
}


def _model(name: str) -> nn.Module:
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(_config(name)).eval()
    with torch.no_grad():  # give the fused projection a bias to split too (random init leaves it zero)
        for m in model.modules():
            lin = getattr(m, "qkv_proj", None) or getattr(m, "query_key_value", None)
            if isinstance(lin, nn.Linear) and lin.bias is not None:
                lin.bias.normal_()
    return model


def _fused(attn: nn.Module) -> nn.Linear:
    lin = getattr(attn, "qkv_proj", None) or getattr(attn, "query_key_value", None)
    assert isinstance(lin, nn.Linear)
    return lin


@pytest.mark.parametrize("name", list(CASES))
def test_fused_heads_are_the_rows_the_family_splits_out(name: str) -> None:
    split, kv_heads = CASES[name]
    model = _model(name)
    adapter = adapter_for(model)
    assert adapter.family == "generic" and len(adapter.layers) == 2
    ids = torch.randint(0, 64, (2, T))
    a = torch.randn(2, T, D, dtype=torch.float64)
    for spec in adapter.layers:
        w = spec.weights()
        assert (spec.heads, w.heads, w.kv_heads) == (H, H, kv_heads)
        attn = spec.attn_in.module
        lin = _fused(attn)
        # every weight row of the module appears exactly once among the slices
        parts = [w.wq, w.wk, w.wv]
        assert sum(p.numel() for p in parts) == lin.weight.numel()
        got = torch.cat([p.permute(0, 2, 1).reshape(-1, D) for p in parts])  # (rows, d)
        want = lin.weight.detach().double()
        assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, want.tolist()))
        # and they are the rows the family reads as each head's q, k, v
        out = a @ want.T + (0.0 if lin.bias is None else lin.bias.detach().double())
        q, k, v = split(attn, out)
        assert q.shape == (2, T, H, DH)
        idx = w.kv_index()
        for ref, weight, bias, per_head in (
            (q, w.wq, w.bq, False),
            (k, w.wk, w.bk, True),
            (v, w.wv, w.bv, True),
        ):
            assert (bias is None) == (lin.bias is None)
            mine = torch.einsum("btd,hde->bthe", a, weight) + (0.0 if bias is None else bias)
            if per_head and ref.shape[2] == H and weight.shape[0] != H:  # the family broadcast its KV heads
                mine = mine[:, :, idx]
            torch.testing.assert_close(mine, ref, rtol=1e-12, atol=1e-12)
    got_p = capture(
        adapter, Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    )
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        att = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True).attentions
    for i, spec in enumerate(adapter.layers):
        assert spec.probs is not None and spec.causal
        probs = got_p.layers[i].probs
        assert probs is not None
        torch.testing.assert_close(probs, att[i].unsqueeze(1))


@pytest.mark.parametrize("name", ["phi3", "neox", "bloom", "falcon_mq", "falcon_new"])
def test_spectrum_on_a_saved_folder(name: str, tmp_path: Path, cli: Callable[..., Result]) -> None:
    _model(name).save_pretrained(tmp_path)
    result = cli("spectrum", str(tmp_path), "--max-samples", "2", "--batch-size", "2", "--layers", "0,-1")
    assert result.exit_code == 0, result.output
    assert "not a known family" in result.output
