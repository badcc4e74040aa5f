"""A ``checkpoint`` state dict fitted to an architecture, or exactly why not (the file is read by
:mod:`condcli.loading.weights_files`, the one reader of weights files).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from condcli.errors import InputError
from condcli.loading.weights_files import NOT_REAL_FIX

SHOW = 3  # keys listed in a mismatch message


def _candidates(sd: dict[str, torch.Tensor], model: nn.Module) -> list[dict[str, torch.Tensor]]:
    """The state dict as given, then with an HF base-model prefix removed or added."""
    out = [sd]
    prefix = getattr(model, "base_model_prefix", "")
    if prefix:
        p = prefix + "."
        if any(k.startswith(p) for k in sd):
            out.append({k[len(p) :] if k.startswith(p) else k: v for k, v in sd.items()})
        else:
            out.append({p + k: v for k, v in sd.items()})
    return out


def _first(keys: list[str]) -> str:
    shown = ", ".join(keys[:SHOW])
    return shown + (", …" if len(keys) > SHOW else "")


def load_into(model: nn.Module, sd: dict[str, torch.Tensor], path: Path, arch: str) -> None:
    """Load ``sd`` into ``model`` strictly; a mismatch is one error naming the first bad keys."""
    expected = model.state_dict()
    best = min(_candidates(sd, model), key=lambda c: len(set(expected) ^ set(c)))
    missing = sorted(set(expected) - set(best))
    unexpected = sorted(set(best) - set(expected))
    shapes = [
        f"{k} {tuple(best[k].shape)} vs {tuple(expected[k].shape)}"
        for k in sorted(set(best) & set(expected))
        if best[k].shape != expected[k].shape
    ]
    # buffers that models recompute (e.g. HF position_ids) may be absent from a checkpoint
    params = {name for name, _ in model.named_parameters()}
    missing = [k for k in missing if k in params or not k.endswith("position_ids")]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing key(s) ({_first(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected key(s) ({_first(unexpected)})")
        if shapes:
            parts.append(f"{len(shapes)} shape mismatch(es) ({_first(shapes)})")
        raise InputError(
            f"`checkpoint={path}` does not fit {arch}: " + "; ".join(parts),
            "pass as MODEL the architecture (and size) this checkpoint was trained with",
        )
    not_real = [
        f"{k} {str(best[k].dtype).replace('torch.', '')}"
        for k in sorted(set(best) & set(expected))
        if expected[k].is_floating_point() and not best[k].is_floating_point()
    ]
    if not_real:
        raise InputError(
            f"`checkpoint={path}` holds {len(not_real)} tensor(s) that are not real floating point where"
            f" {arch} has float weights ({_first(not_real)})",
            NOT_REAL_FIX,
        )
    model.load_state_dict(best, strict=False)
