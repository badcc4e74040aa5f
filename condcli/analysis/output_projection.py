"""W_O, the attention's output projection, where the adapters do not name it: found by the name each family
gives it, and kept only where its shape is that of W_O for this layer's heads (H·d_h in, d out).

Known names, on the attention module: ``o_proj`` (Llama, Mistral, Qwen, Gemma, Phi-3), ``out_proj`` (OPT,
BART, CLIP, ``nn.MultiheadAttention``), ``proj`` (timm), ``c_proj`` (GPT-2's Conv1D), ``dense`` (GPT-NeoX,
Falcon, Bloom, Phi), ``out_lin`` (DistilBERT), ``o`` (T5), ``wo``; on its parent, ``output.dense`` (BERT,
HF ViT: the self-attention's sibling). Anything else is reported absent, with that reason: never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from condcli.adapters.base import HeadWeights

ON_ATTENTION = ("o_proj", "out_proj", "proj", "c_proj", "dense", "out_lin", "o", "wo")


@dataclass(frozen=True)
class OutputProjection:
    """Where W_O was found: its module path, its module, and whether its weight is (in, out) (a Conv1D)."""

    path: str
    module: nn.Module
    in_out: bool  # weight stored (H·d_h, d), right-multiplying (GPT-2 Conv1D); else nn.Linear's (d, H·d_h)

    def right_multiplying(self) -> torch.Tensor:
        """W_O as the (H·d_h) × d matrix the attention's output multiplies, float64."""
        w = self.module.weight
        assert isinstance(w, torch.Tensor)
        w = w.detach().to(torch.float64)
        return w if self.in_out else w.T

    def describe(self) -> str:
        kind = "Conv1D, (in, out)" if self.in_out else type(self.module).__name__
        return f"{self.path} ({kind})"


def _orientation(module: nn.Module) -> bool | None:
    """True: weight is (in, out) (transformers' Conv1D); False: nn.Linear's (out, in); None: unknown."""
    if isinstance(module, nn.Linear):
        return False
    if type(module).__name__ == "Conv1D" and hasattr(module, "nf"):
        return True
    return None


def find_output_projection(
    model: nn.Module, attn: nn.Module, heads: HeadWeights | tuple[int, int, int]
) -> tuple[OutputProjection | None, str]:
    """W_O of ``attn`` in ``model`` and where it was read, or None and why it is absent.

    ``heads``: the layer's HeadWeights, or (H, d, d_h) — the shape W_O must have."""
    if isinstance(heads, HeadWeights):
        h, d, dh = int(heads.wq.shape[0]), int(heads.wq.shape[1]), int(heads.wq.shape[2])
    else:
        h, d, dh = heads
    paths = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
    where = paths.get(id(attn))
    candidates: list[tuple[str, nn.Module]] = []
    for name in ON_ATTENTION:
        sub = getattr(attn, name, None)
        if isinstance(sub, nn.Module):
            candidates.append((name, sub))
    if where is not None and "." in where:
        parent = model.get_submodule(where.rsplit(".", 1)[0])
        dense = getattr(getattr(parent, "output", None), "dense", None)
        if isinstance(dense, nn.Module):
            candidates.append(("../output.dense", dense))
    for name, sub in candidates:
        orient = _orientation(sub)
        w = getattr(sub, "weight", None)
        if orient is None or not isinstance(w, torch.Tensor) or w.ndim != 2:
            continue
        shape = (h * dh, d) if orient else (d, h * dh)
        if tuple(w.shape) != shape:
            continue
        path = paths.get(id(sub), name)
        return OutputProjection(path, sub, orient), f"W_O: {path}"
    what = type(attn).__name__
    return None, f"W_O not found: {what} has no output projection of a known name and shape ({h}·{dh} → {d})"


def output_heads(w_o: torch.Tensor, heads: int) -> torch.Tensor:
    """(H·d_h) × d right-multiplying W_O → (H, d_h, d): each head's block of rows."""
    return w_o.reshape(heads, -1, w_o.shape[-1])
