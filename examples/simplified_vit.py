"""The simplified ViT of the blog "Optimizations of Transformers for Small-scale Performance"
(../shared/papers/simplified-vit-small-scale-blog.txt), after He & Hofmann's SAS-P block.

Conv2d patch embedding, a learned position embedding, one LayerNorm just before the encoder, then SAS-P
blocks: no skip connections, no normalisation, no value or output projection (W_V is the identity: head h
mixes its d/H channels of the block input), the shaped attention αI + βP in place of P (α, β learnable per
head, initialised 0.5 and 0.5 as in the blog's experiments), no centering matrix, and the MLP
Linear(GELU(Linear)) in parallel with the attention: block(x) = shaped_attention(x) + mlp(x). The
blog's snippet divides the logits by d_h^-0.5; this uses the usual scaling q kᵀ/√d_h.

The attention exposes ``mixing_matrix(p)`` (the matrix that really mixes the tokens, for condcli's
``kappa_mixing``). ``condcli spectrum examples/simplified_vit.py:build --weights random``
"""

import torch
from torch import nn


class ShapedAttention(nn.Module):
    def __init__(self, dim: int, heads: int, alpha: float = 0.5, beta: float = 0.5):
        super().__init__()
        self.heads = heads
        self.q, self.k = nn.Linear(dim, dim), nn.Linear(dim, dim)  # no value, no output projection
        self.alpha = nn.Parameter(torch.full((heads,), alpha))  # one α, β per head
        self.beta = nn.Parameter(torch.full((heads,), beta))
        self.softmax = nn.Softmax(dim=-1)

    def mixing_matrix(self, p: torch.Tensor) -> torch.Tensor:
        """αI + βP per head: P of shape (..., heads, queries, keys) → the same shape."""
        eye = torch.eye(p.shape[-2], p.shape[-1], dtype=p.dtype, device=p.device)
        alpha, beta = (s.to(p.dtype)[:, None, None] for s in (self.alpha, self.beta))
        return alpha * eye + beta * p

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, N, d)
        B, N, d = x.shape
        q, k, v = (t.reshape(B, N, self.heads, -1).transpose(1, 2) for t in (self.q(x), self.k(x), x))
        p = self.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5)  # P: (B, heads, N, N)
        return (self.mixing_matrix(p) @ v).transpose(1, 2).reshape(B, N, d)


class Block(nn.Module):
    """SAS-P: shaped attention and the MLP side by side, no skip connection, no normalisation."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.attn = ShapedAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x) + self.mlp(x)


class SimplifiedViT(nn.Module):
    def __init__(self, img_size: int, patch: int, dim: int, depth: int, heads: int, classes: int):
        super().__init__()
        self.img_size = img_size  # condcli feeds images of this size
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos_embed = nn.Parameter(torch.randn(1, (img_size // patch) ** 2, dim))  # random initial
        self.norm = nn.LayerNorm(dim)  # the one LayerNorm, just before the encoder
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(depth)))
        self.head = nn.Linear(dim, classes)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(pixels).flatten(2).transpose(1, 2) + self.pos_embed
        return self.head(self.blocks(self.norm(x)).mean(1))


def build(
    img_size: int = 32, patch: int = 8, dim: int = 32, depth: int = 2, heads: int = 4, classes: int = 10
) -> SimplifiedViT:
    """A tiny simplified ViT (the blog's runs: patch 4, width 96 or 128, 4 heads, 8 or 12 layers)."""
    return SimplifiedViT(img_size, patch, dim, depth, heads, classes)
