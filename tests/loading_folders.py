"""Tiny model folders (timm save_for_hf, HF save_pretrained) and the ways a careless or hostile user breaks
them: for tests/test_loading_hostile.py and tests/hostile_cases_loading.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import torch

TIMM_ARGS = {"depth": 1, "embed_dim": 32, "num_heads": 2, "img_size": 32, "patch_size": 8, "num_classes": 0}


def timm_folder(folder: Path, **model_args: Any) -> Path:
    """A one-block ViT saved by timm's save_for_hf; ``model_args`` then overwrite its config.json's."""
    import timm
    from timm.models import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, **TIMM_ARGS)
    save_for_hf(model, str(folder), model_args=dict(TIMM_ARGS), safe_serialization=True)
    edit_config(folder, lambda cfg: cfg["model_args"].update(model_args))
    return folder


def hf_folder(folder: Path, **config: Any) -> Path:
    """A one-layer GPT-2 saved by save_pretrained; ``config`` then overwrites config.json's entries."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        n_embd=32, n_layer=1, n_head=2, n_positions=32, vocab_size=64, bos_token_id=0, eos_token_id=0
    )
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    edit_config(folder, lambda cfg: cfg.update(config))
    return folder


def edit_config(folder: Path, change: Any) -> None:
    file = folder / "config.json"
    cfg = json.loads(file.read_text())
    change(cfg)
    file.write_text(json.dumps(cfg))


def _header(file: Path) -> tuple[dict[str, Any], bytes]:
    data = file.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _write(file: Path, header: dict[str, Any], body: bytes) -> None:
    raw = json.dumps(header).encode()
    file.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def truncate(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def empty(file: Path) -> None:
    file.write_bytes(b"")


def lying_header(file: Path) -> None:
    """A tensor whose offsets point far past the end of the file."""
    header, body = _header(file)
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"][1] += 10**12
    _write(file, header, body)


def huge_header(file: Path) -> None:
    """A header that claims to be 4 EiB long."""
    file.write_bytes(struct.pack("<Q", 2**62) + b"{}")


CORRUPTIONS = {
    "truncated": truncate,
    "empty": empty,
    "lying-header": lying_header,
    "huge-header": huge_header,
}


def first_matrix(file: Path) -> str:
    """The name of the first 2-D float tensor of a safetensors file (sorted by name)."""
    from safetensors.torch import load_file

    sd = load_file(str(file))
    return sorted(k for k, v in sd.items() if v.dim() == 2 and v.is_floating_point())[0]


def poison(file: Path, value: float = float("inf")) -> str:
    """Write ``value`` into the first matrix of a safetensors file; returns its name."""
    from safetensors.torch import load_file, save_file

    sd = load_file(str(file))
    name = first_matrix(file)
    sd[name][0, 0] = value
    save_file(sd, str(file), metadata={"format": "pt"})
    return name


def to_int8(file: Path) -> str:
    """Store the first matrix of a safetensors file as int8 (a quantized tensor); returns its name."""
    from safetensors.torch import load_file, save_file

    sd = load_file(str(file))
    name = first_matrix(file)
    sd[name] = sd[name].to(torch.int8)
    save_file(sd, str(file), metadata={"format": "pt"})
    return name


class RunsCode:
    """A pickle payload that would create ``marker`` when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (Path.touch, (self.marker,))


def unsafe_bin(folder: Path, marker: Path) -> Path:
    """Replace the folder's safetensors with a pytorch_model.bin that would run code (create ``marker``)."""
    (folder / "model.safetensors").unlink()
    file = folder / "pytorch_model.bin"
    torch.save({"w": torch.zeros(1), "evil": RunsCode(marker)}, file)
    return file
