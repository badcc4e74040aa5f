"""A Llama whose head 0 of layer 0 is an attention sink on token 0, by construction (tests/test_sinks.py and
the LLM guide's run, docs/regenerate.py).

Head 0's query is a constant, its bias along ``dim`` (pick a dim of RoPE's slowest pair, which rotates by
well under a milliradian over a prompt), and token 0 alone has a key there: its embedding is e_0 (√d·e_0 after
the RMSNorm) and no other token has a component on e_0. Token 0's logit is then 10 for every query and every
other key's is 0, so P[i, 0] ≈ 1. Head 1 reads the same KV head and gets no query along ``dim``.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def make_sink_head(model: nn.Module, dim: int) -> None:
    """Set ``model`` (a LlamaForCausalLM with ``attention_bias=True``) so that layer 0's head 0 sinks."""
    attn = model.model.layers[0].self_attn  # type: ignore[union-attr,index]
    d = int(model.config.hidden_size)  # type: ignore[union-attr]
    head_dim = int(attn.head_dim)
    with torch.no_grad():
        e = model.get_input_embeddings().weight  # type: ignore[operator]
        e[:, 0] = 0
        e[0] = 0
        e[0, 0] = 1.0  # token 0 alone has a component on e_0; after RMSNorm it is √d·e_0
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            proj.bias.zero_()
        attn.q_proj.weight[:head_dim] = 0  # head 0: q = its bias, 5·e_dim
        attn.q_proj.bias[dim] = 5.0
        attn.q_proj.weight[head_dim + dim] = 0  # head 1 reads the same KV head: no q along e_dim
        attn.k_proj.weight[dim] = 0
        attn.k_proj.weight[dim, 0] = 2.0 / math.sqrt(d) * math.sqrt(head_dim)  # token 0's logit: 2·5·1 = 10
