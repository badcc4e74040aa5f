"""``device`` (auto | cpu | cuda | cuda:N) and ``dtype`` names → torch objects, with one clear error each."""

from __future__ import annotations

import re

import torch

from condcli.errors import UsageError

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks the first CUDA GPU when there is one, else the CPU. Under torchrun ``auto`` and ``cuda``
    are each process's own GPU, ``cuda:LOCAL_RANK`` (modulo the GPUs there are)."""
    from condcli.distributed import world

    text = name.strip().lower()
    w = world()
    if w is not None and text in ("auto", "cuda") and torch.cuda.is_available():
        text = f"cuda:{w.local_rank % torch.cuda.device_count()}"  # more ranks than GPUs: they share
    if text == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if text == "cpu":
        return torch.device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if match is None:
        raise UsageError(f"unknown device {name!r}", "use `device=auto`, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise UsageError(
            f"`device={name}`: CUDA is not available on this machine", "use `device=cpu` or auto"
        )
    index = int(match.group(1) or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise UsageError(
            f"`device={name}`: this machine has {count} CUDA device(s) (cuda:0…cuda:{count - 1})",
            "pick one of those, or `device=auto`",
        )
    return torch.device("cuda", index)


def resolve_dtype(name: str | None) -> torch.dtype | None:
    """None keeps the model's own dtype."""
    if name is None:
        return None
    try:
        return DTYPES[name.strip().lower()]
    except KeyError:
        raise UsageError(f"unknown dtype {name!r}", f"use one of {', '.join(DTYPES)}") from None
