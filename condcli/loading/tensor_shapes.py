"""One check of the tensors a safetensors file stores against the parameters of the model they are for.

``condcli weights`` swaps file tensors into a meta skeleton one by one, and ``spectrum``'s loader hands a
folder to transformers: both first compare each stored tensor that the model has a parameter for with that
parameter (:func:`check_stored`), so a tensor of another shape or a non-float one for a float parameter is
one :class:`InputError` naming the file, the tensor and both shapes, before any number is computed from it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from condcli.errors import InputError
from condcli.loading.safetensors_stream import FLOATS, TensorInfo, file_key

FIX = "check that config.json and the weights files belong together (save the model again: save_pretrained)"
NOT_FLOAT_FIX = "give float weights (a quantized checkpoint must be dequantized first)"


def check_stored(key: str, info: TensorInfo, expected: torch.Tensor) -> None:
    """Refuse the stored tensor ``key`` (``info``, from its file's checked header) where the model's
    parameter ``expected`` (meta or real) has another shape, or is float and the stored one is not."""
    if expected.is_floating_point() and info.dtype not in FLOATS:
        raise InputError(f"weight '{key}' is {info.dtype} in {info.file}, not floating point", NOT_FLOAT_FIX)
    if tuple(info.shape) != tuple(expected.shape):
        raise InputError(
            f"weight '{key}' in {info.file} has shape {list(info.shape)}, the model expects"
            f" {list(expected.shape)}",
            FIX,
        )


def prefixes_of(model: nn.Module) -> dict[str, str]:
    """How a file's keys may differ from the model's names: a folder saved from the base model (keys without
    ``model.``) or from a task model (keys with it)."""
    prefix = getattr(model, "base_model_prefix", "") or ""
    return {f"{prefix}.": "", "": f"{prefix}."} if prefix else {}


def check_model(model: nn.Module, tensors: Mapping[str, TensorInfo]) -> None:
    """:func:`check_stored` for every parameter of ``model`` that the files hold."""
    prefixes = prefixes_of(model)
    for name, param in model.named_parameters():
        key = file_key(name, tensors, prefixes)
        if key is not None:
            check_stored(key, tensors[key], param)


def skeleton(config: Any, trust: bool) -> nn.Module:
    """The whole model ``config`` describes (its config class, else AutoModel), on the meta device, tied."""
    from accelerate import init_empty_weights
    from transformers import AutoModel

    from condcli.loading.hf import config_class

    cls: Any = config_class(config)
    with init_empty_weights(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model: nn.Module = (
            cls._from_config(config)
            if cls is not None
            else AutoModel.from_config(config, trust_remote_code=trust)
        )
    tie = getattr(model, "tie_weights", None)
    if callable(tie):
        tie()  # under init_empty_weights transformers leaves the tied head its own meta tensor
    return model.eval()


def check_hf_folder(config: Any, trust: bool, tensors: Mapping[str, TensorInfo]) -> None:
    """The folder's stored tensors (``tensors``) against the model ``config`` describes, built on the meta
    device; what transformers would then load is what the model expects."""
    if not tensors:
        return
    try:
        model = skeleton(config, trust)
    except Exception:  # a config that does not build: the load that follows says why, in its words
        return
    check_model(model, tensors)
