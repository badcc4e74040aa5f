"""Issue 42 (docs/breadth-audit.md, "Still open"): refusals whose sentence was false for the model.

- EfficientViM's HSM-SSD mixer runs a softmax over ``dt + A`` (a discretisation step, each token's own score),
  and multiplies the tokens by the weights it gives (``x @ (a·b)ᵀ``, then ``h @ c``): no query–key product
  leads to that softmax, so it is no attention P. The probe tells a softmax over a product of two computed
  tensors (q·kᵀ, through a scale, a bias or a mix of heads: talking heads; learned queries are computed too)
  from one over anything else, and a block's output that carries a product of its own is the next block's X,
  not scores;
- MaskFormer's pixel-level module calls its Swin backbone with no ``output_attentions`` (the backbone reads it
  from its own config), and its DETR decoder's config is no sub-config that switching the model to eager
  reaches: both are asked for the capture, and put back after. XCodec's semantic model (HuBERT) is called
  the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from transformers import PretrainedConfig

from condcli.adapters import adapter_for
from condcli.adapters.base import Adapter
from condcli.adapters.generic.probs import hf_forward
from condcli.reports.refusal import Refused

D, N, S, H = 8, 6, 4, 2


class Stack(nn.Module):
    """Two blocks of ``block``, probed on its own ``dummy_inputs`` (as an HF model's)."""

    def __init__(self, block: type[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList([block() for _ in range(2)])

    @property
    def dummy_inputs(self) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(2, N, D, generator=torch.Generator().manual_seed(0))}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class StateMixer(nn.Module):
    """EfficientViM's HSMSSD in small: a softmax over the tokens of ``dt + A`` weighs B, the tokens are
    gathered into S states by it, and read out with C. No q·kᵀ anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.bcdt_proj = nn.Conv1d(D, 3 * S, 1)
        self.out_proj = nn.Conv1d(D, D, 1)
        self.A = nn.Parameter(torch.rand(S) * 15 + 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.transpose(1, 2)  # (B, D, N)
        b, c, dt = self.bcdt_proj(x).chunk(3, 1)
        a = (dt + self.A.view(1, -1, 1)).softmax(-1)
        h = x @ (a * b).transpose(-2, -1)  # (B, D, S)
        y = self.out_proj(h) @ c  # (B, D, N)
        return (x + y).transpose(1, 2)


class TalkingHeadsAttention(nn.Module):
    """EfficientFormerV2's attention in small: heads mixed after q·kᵀ and after the softmax, one fused
    projection the generic path does not read."""

    def __init__(self) -> None:
        super().__init__()
        self.to_all = nn.Linear(D, 3 * D)
        self.talking_head1, self.talking_head2 = nn.Conv2d(H, H, 1), nn.Conv2d(H, H, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.to_all(x).view(x.shape[0], N, 3, H, D // H).permute(2, 0, 3, 1, 4)
        attn = self.talking_head1(q @ k.transpose(-2, -1) * (D // H) ** -0.5)
        attn = self.talking_head2(attn.softmax(-1))
        return x + (attn @ v).transpose(1, 2).flatten(2)


class LatentQueryAttention(nn.Module):
    """Learned queries (a parameter, projected) over the tokens' keys: q·kᵀ with q computed from weights."""

    def __init__(self) -> None:
        super().__init__()
        self.latents = nn.Parameter(torch.randn(N, D))
        self.to_q, self.to_kv = nn.Linear(D, D), nn.Linear(D, 2 * D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, v = self.to_kv(x).chunk(2, -1)
        return x + (self.to_q(self.latents) @ k.transpose(-2, -1)).softmax(-1) @ v


class ScorePool(nn.Module):
    """Each token scored by a weight vector (a projection, not q·kᵀ), a softmax over the tokens, the tokens
    summed with those weights and broadcast back: attention pooling, no query–key scores."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(D, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = (x @ self.w).transpose(1, 2).softmax(-1)  # (B, 1, N)
        return x + weights @ x


class GlobalContext(nn.Module):
    """timm's global context block in small: the tokens pooled by a softmax of their own scores into one
    vector, which gates the channels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_attn = nn.Conv1d(D, 1, 1)
        self.gate = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attn = self.conv_attn(x.transpose(1, 2)).softmax(-1)  # (B, 1, N)
        context = (x.transpose(1, 2) @ attn.transpose(1, 2)).squeeze(-1)  # (B, D)
        return x * torch.sigmoid(self.gate(context)).unsqueeze(1)


def refusal_of(model: nn.Module) -> Refused:
    with pytest.raises(Refused) as e:
        adapter_for(model.eval())
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    return e.value


def test_a_softmax_over_no_query_key_product_is_no_attention_p() -> None:
    r = refusal_of(Stack(StateMixer))
    assert r.code == "linear-attention", str(r)
    assert "softmax ran in layers.0 (StateMixer)" in str(r) and "no query–key product" in str(r)
    assert "a softmax over the keys multiplied the values" not in str(r)


@pytest.mark.parametrize("block", [TalkingHeadsAttention, LatentQueryAttention])
def test_a_softmax_over_query_key_scores_is_attention(block: type[nn.Module]) -> None:
    r = refusal_of(Stack(block))
    assert r.code == "qkv-unreadable", str(r)
    assert "a softmax over the keys multiplied the values" in str(r)


def test_a_product_with_a_weight_is_no_query_key_product() -> None:
    r = refusal_of(Stack(ScorePool))
    assert r.code == "linear-attention" and "(ScorePool)" in str(r), str(r)


def test_a_softmax_that_pools_a_channel_gate_is_no_attention() -> None:
    r = refusal_of(Stack(GlobalContext))
    assert r.code == "no-attention", str(r)
    assert "GlobalContext" in str(r) and "gates channels" in str(r)


class WeightsOnRequest(nn.Module):
    """An attention that returns its weights only when asked (BERT-era code)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor, output_attentions: bool = False) -> tuple[torch.Tensor, ...]:
        p = (self.q(x) @ self.k(x).transpose(-2, -1)).softmax(-1)
        out = p @ self.v(x)
        if output_attentions:
            return out, p
        return (out,)


class Backbone(nn.Module):
    """A sub-model that reads ``output_attentions`` from its own config where its caller passes none."""

    def __init__(self) -> None:
        super().__init__()
        self.config = PretrainedConfig()
        self.config._attn_implementation_internal = "eager"  # as the capture runs it
        self.attn = WeightsOnRequest()
        self.returned: list[int] = []

    def forward(self, x: torch.Tensor, output_attentions: bool | None = None) -> torch.Tensor:
        asked = self.config.output_attentions if output_attentions is None else output_attentions
        out = self.attn(x, output_attentions=asked)
        self.returned.append(len(out))
        return out[0]  # type: ignore[no-any-return]


class Whole(nn.Module):
    """MaskFormer's shape: the model takes ``output_attentions`` and calls its backbone without it."""

    def __init__(self) -> None:
        super().__init__()
        self.config = PretrainedConfig()
        self.pixel_level_module = Backbone()

    def forward(self, x: torch.Tensor, output_attentions: bool | None = None) -> torch.Tensor:
        return self.pixel_level_module(x)  # type: ignore[no-any-return]


def test_a_backbone_called_without_the_flag_is_asked_through_its_config() -> None:
    model = Whole()
    backbone = model.pixel_level_module
    run = hf_forward(model, [backbone.attn])
    assert run is not None
    run({"x": torch.randn(2, N, D)})
    assert backbone.returned == [2]  # the weights came back beside the output
    assert backbone.config.output_attentions is False  # and the config is as it was


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.config = PretrainedConfig()
        self.config._attn_implementation_internal = "sdpa"


class EagerWhole(nn.Module):
    """A model already eager whose decoder's config (no sub-config of the model's) is set to SDPA."""

    def __init__(self) -> None:
        super().__init__()
        self.config = PretrainedConfig()
        self.config._attn_implementation_internal = "eager"
        self.decoder = Decoder()

    def set_attn_implementation(self, impl: str) -> None:  # pragma: no cover - not called: already eager
        raise AssertionError(impl)


def test_a_part_the_eager_switch_does_not_reach_is_switched_on_its_own() -> None:
    model = EagerWhole()
    embedding: Any = None  # eager_attention reads only the model and its flags
    adapter = Adapter(family="generic", model=model, embedding=embedding, layers=(), input_kind="images")
    with adapter.eager_attention():
        assert model.decoder.config._attn_implementation == "eager"
    assert model.decoder.config._attn_implementation == "sdpa"
    assert model.config._attn_implementation == "eager"


class BiasedAttention(nn.Module):
    """Bloom's scores in small: ``bias.baddbmm(batch1=q, batch2=kᵀ)``, the factors given by keyword."""

    def __init__(self) -> None:
        super().__init__()
        self.to_all = nn.Linear(D, 3 * D)
        self.register_buffer("bias", torch.zeros(1, N, N))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.to_all(x).chunk(3, -1)
        scores = self.bias.baddbmm(batch1=q, batch2=k.transpose(1, 2), beta=1.0, alpha=D**-0.5)
        return x + scores.softmax(-1) @ v


def test_scores_added_to_a_bias_by_baddbmm_are_scores() -> None:
    r = refusal_of(Stack(BiasedAttention))
    assert r.code == "qkv-unreadable", str(r)
