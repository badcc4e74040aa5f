"""Conformance cases of the generic adapter on models of no family: the shared toy model (P from an
``nn.Softmax`` module, from a plain-function softmax, or not observable), an HF model's returned weights,
and the toy with its q, k, v found other ways (tests/toy_readings.py): upper-case names, q_head/k_head/v_head,
1×1 Conv1d/Conv2d maps, plain parameters multiplied as x @ W or F.linear(x, W)."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import transformers as tf
from torch import nn

from tests.families import (
    HEADS,
    INIT,
    LAYERS,
    QKV_GAIN,
    VOCAB,
    Case,
    D,
    Site,
    Tensor,
    images,
    linears,
    softmax_probs,
    tokens,
)
from tests.toy_models import FactorizedAttention, ToyModel
from tests.toy_readings import (
    BroadcastScoresAttention,
    EinsumAttention,
    ToyParameters,
    ToyProjections,
    broadcast_scores,
    conv1d,
    conv2d,
    einsum,
    head_names,
    hf_conv1d,
    parameters,
    parameters_linear,
    upper_case,
)


def toy() -> nn.Module:
    """The shared toy model of no known family (tests/toy_models.py): separate q/k/v, an ``nn.Softmax``."""
    torch.manual_seed(0)
    model = ToyModel(d=16, heads=4, depth=2).eval()
    with torch.no_grad():
        for block in model.layers:
            block.attn.q.weight.mul_(QKV_GAIN)
    return model


def toy_functional() -> nn.Module:
    """The toy with its softmax made a plain function, as most models have it: P has no module to hook and
    is observed inside the attention's call."""
    model = toy()
    for block in model.layers:
        del block.attn.softmax  # the nn.Softmax child module
        block.attn.softmax = partial(torch.softmax, dim=-1)
    return model


def toy_factorized() -> nn.Module:
    """The toy with CoaT-like factorized attention (softmax of K over the tokens): P truly does not exist."""
    model = toy()
    for block in model.layers:
        factorized = FactorizedAttention(16, 4)
        factorized.load_state_dict(block.attn.state_dict())
        block.attn = factorized.eval()
    return model


def toy_layers(m: Any, img: Tensor) -> tuple[Tensor, list[Tensor]]:
    """X = the patch embedding (the first block's input); X_l: the blocks called in order."""
    patches = img.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)
    x = m.embed(patches)
    x_ref, x_layers = x, []
    for layer in m.layers:
        x_layers.append(x)
        x = layer(x)
    return x_ref, x_layers


def toy_sites(m: Any) -> list[Site]:
    probs = None if isinstance(m.layers[0].attn, FactorizedAttention) else softmax_probs
    return [linears(a, None, a.q, a.k, a.v, probs=probs) for a in (b.attn for b in m.layers)]


def named_sites(m: Any) -> list[Site]:
    """Separate q, k, v maps under any names (Wq, q_head, …), Linear or 1×1 convolutions: W is the weight
    flattened to (out, in) and transposed, as y = x W + b."""
    sites = []
    for a in (b.attn for b in m.layers):
        assert isinstance(a, ToyProjections)
        maps = [getattr(a, n) for n in a.names]
        if a.kind == "hf_conv1d":  # y = x W + b with W stored (in, out)
            w = {r: (c.weight, c.bias) for r, c in zip("qkv", maps, strict=True)}
        else:
            w = {r: (c.weight.flatten(1).T, c.bias) for r, c in zip("qkv", maps, strict=True)}
        sites.append(Site(a, None, w, a.num_heads, probs=softmax_probs))
    return sites


def einsum_sites(m: Any) -> list[Site]:
    sites = []
    for a in (b.attn for b in m.layers):
        assert isinstance(a, EinsumAttention | BroadcastScoresAttention)
        sites.append(linears(a, None, a.q, a.k, a.v, probs=softmax_probs))
    return sites


def parameter_sites(m: Any) -> list[Site]:
    """W_Q, W_K, W_V held as plain parameters, as the toy's forward multiplies them."""
    sites = []
    for a in (b.attn for b in m.layers):
        assert isinstance(a, ToyParameters)
        w = dict(zip("qkv", a.weights(), strict=True))
        sites.append(Site(a, None, w, a.num_heads, probs=softmax_probs))  # type: ignore[arg-type]
    return sites


def distilbert() -> nn.Module:
    """An HF model of no known family: P is the weights its attention returns under eager attention."""
    torch.manual_seed(0)
    config = tf.DistilBertConfig(
        vocab_size=VOCAB, dim=D, n_layers=LAYERS, n_heads=HEADS, hidden_dim=64, initializer_range=INIT
    )
    return tf.DistilBertModel(config).eval()


def distilbert_sites(m: Any) -> list[Site]:
    return [
        Site(
            a,
            a.out_lin,
            {r: (lin.weight.T, lin.bias) for r, lin in zip("qkv", (a.q_lin, a.k_lin, a.v_lin), strict=True)},
            a.n_heads,
        )
        for a in (layer.attention for layer in m.transformer.layer)
    ]


CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "softmax_module": Case(toy, images, toy_sites, toy_layers),
        "functional_softmax": Case(toy_functional, images, toy_sites, toy_layers),
        "factorized_no_probs": Case(toy_factorized, images, toy_sites, toy_layers, observable=False),
        "hf_returned_weights": Case(distilbert, partial(tokens, [7, 4], 7), distilbert_sites),
        # more ways to find q, k, v (issue 29): names in any case, q_head, 1×1 convolutions, parameters
        "upper_case_wq_wk_wv": Case(upper_case, images, named_sites, toy_layers),
        "q_head_k_head_v_head": Case(head_names, images, named_sites, toy_layers),
        "conv1d_projections": Case(conv1d, images, named_sites, toy_layers),
        "conv2d_1x1_projections": Case(conv2d, images, named_sites, toy_layers),
        "hf_conv1d_projections": Case(hf_conv1d, images, named_sites, toy_layers),
        "parameters_x_at_w": Case(parameters, images, parameter_sites, toy_layers),
        "parameters_f_linear": Case(parameters_linear, images, parameter_sites, toy_layers),
        "einsum_scores": Case(einsum, images, einsum_sites, toy_layers),
        "scores_by_broadcast_p_recomputed": Case(broadcast_scores, images, einsum_sites, toy_layers),
    },
}
