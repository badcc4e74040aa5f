"""The sample ViTs: a small timm VisionTransformer on ``shapes10``, plain and with conditioned tokens.

Both runs share the seed, the initial weights, the data, its order and the schedule; the conditioned one
wraps ``pos_drop`` in ``condcli.conditioning.ConditionedEmbedding`` (X + λ·I_k after positional encoding).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from condcli.adapters import condition_model
from condcli.conditioning import ConditionedEmbedding
from samplegen import shapes
from samplegen.common import deterministic, fit

ARCHITECTURE = "vit_tiny_patch16_224"  # timm builder; model_args below make it 32×32, patch 4


@dataclass(frozen=True)
class VitRecipe:
    """Everything that decides the weights of a sample ViT."""

    embed_dim: int = 96
    depth: int = 6
    num_heads: int = 4
    mlp_ratio: float = 2.0
    train_size: int = 24_000  # shapes10 images, generated with train_seed
    heldout_size: int = 2_000  # generated with heldout_seed (never seen in training)
    train_seed: int = 1
    heldout_seed: int = 2
    epochs: int = 3
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 50
    seed: int = 0  # initial weights and batch order
    lam: float | None = None  # None: plain; else X + lam·I_k after positional encoding

    def model_args(self) -> dict[str, Any]:
        return {
            "img_size": shapes.SIZE,
            "patch_size": 4,
            "embed_dim": self.embed_dim,
            "depth": self.depth,
            "num_heads": self.num_heads,
            "mlp_ratio": self.mlp_ratio,
            "num_classes": len(shapes.CLASSES),
        }


def create(recipe: VitRecipe) -> nn.Module:
    """The untrained ViT, with a preprocessing config that matches ``shapes.normalise``."""
    import timm

    overlay = {
        "input_size": (3, shapes.SIZE, shapes.SIZE),
        "mean": shapes.MEAN,
        "std": shapes.STD,
        "crop_pct": 1.0,
        "interpolation": "bilinear",
        "hf_hub_id": None,
        "tag": "condcli-shapes10",
        "license": "mit",
        "description": "condcli sample: trained on shapes10 (procedurally generated), see metadata.json",
    }
    model: nn.Module = timm.create_model(ARCHITECTURE, pretrained_cfg_overlay=overlay, **recipe.model_args())
    return model


def heldout(recipe: VitRecipe) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Held-out pixels (n, 3, 32, 32), labels (n,) and the split's sha256."""
    images, labels = shapes.make_shapes(recipe.heldout_size, recipe.heldout_seed)
    return torch.from_numpy(shapes.normalise(images)), torch.from_numpy(labels), shapes.digest(images, labels)


@torch.no_grad()
def evaluate(model: nn.Module, pixels: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Accuracy and mean cross-entropy on a labelled set, in batches of 500."""
    model.eval()
    logits = torch.cat([model(pixels[i : i + 500]) for i in range(0, len(pixels), 500)])
    return {
        "accuracy": float((logits.argmax(-1) == labels).double().mean()),
        "loss": float(F.cross_entropy(logits.double(), labels)),
    }


def train(
    recipe: VitRecipe, heldout: tuple[torch.Tensor, torch.Tensor], log: Any = print
) -> tuple[nn.Module, dict[str, Any]]:
    """Train one sample ViT; returns the model (conditioning removed again) and what happened.

    ``heldout`` (pixels, labels) is scored at the end, with the model as trained.
    """
    deterministic(recipe.seed)
    model = create(recipe)
    if recipe.lam is not None:
        condition_model(model, lam=recipe.lam)
    images, labels = shapes.make_shapes(recipe.train_size, recipe.train_seed)
    x, y = torch.from_numpy(shapes.normalise(images)), torch.from_numpy(labels)

    def batch_loss(idx: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return F.cross_entropy(model(x[idx]), y[idx])

    run = fit(model, len(x), batch_loss, recipe, log)
    scores = evaluate(model, *heldout)  # as trained: with the shift for a conditioned recipe
    vit: Any = model  # timm internals are untyped
    if isinstance(vit.pos_drop, ConditionedEmbedding):
        vit.pos_drop = vit.pos_drop.inner  # saved plain; metadata.json says to re-apply the shift
    return model, run | {
        "recipe": asdict(recipe),
        "train": {"images": recipe.train_size, "sha256": shapes.digest(images, labels)},
        "heldout_in_memory": scores,
    }


def save(model: nn.Module, folder: Path) -> None:
    """config.json (timm ``save_for_hf`` layout, with the class names) and model.safetensors."""
    from timm.models import save_for_hf

    save_for_hf(
        model, str(folder), model_config={"label_names": list(shapes.CLASSES)}, safe_serialization=True
    )
