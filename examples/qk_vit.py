"""A ViT whose attention the generic adapter cannot read: a fused [Q | K] projection and no value projection
(V is the attention's input). ``examples/qk_vit.toml`` declares it: ``condcli spectrum
examples/qk_vit.py:build --adapter examples/qk_vit.toml``."""

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.qk = heads, nn.Linear(dim, 2 * dim)  # [Q | K]; no value projection: V = x

    def forward(self, x):  # x: (B, N, d)
        B, N, d = x.shape
        q, k = self.qk(x).reshape(B, N, 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        v = x.reshape(B, N, self.heads, -1).transpose(1, 2)
        p = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)  # P: (B, heads, N, N)
        return (p @ v).transpose(1, 2).reshape(B, N, d)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm, self.attn = nn.LayerNorm(dim), Attention(dim, heads)

    def forward(self, x):
        return x + self.attn(self.norm(x))


class QKViT(nn.Module):
    def __init__(self, img_size: int, patch: int, dim: int, depth: int, heads: int):
        super().__init__()
        self.img_size = img_size  # condcli feeds images of this size
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, (img_size // patch) ** 2, dim))
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(depth)))

    def forward(self, pixels):
        return self.blocks(self.patch_embed(pixels).flatten(2).transpose(1, 2) + self.pos_embed)


def build(img_size: int = 32, patch: int = 4, dim: int = 48, depth: int = 2, heads: int = 4) -> QKViT:
    return QKViT(img_size, patch, dim, depth, heads)
