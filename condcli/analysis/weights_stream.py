"""An HF model folder's weights read tensor by tensor from its safetensors files: the model is built on the
meta device (no memory), and only the parameters a number needs are read, one layer at a time, then dropped.

Which parameters a layer's W slices need is observed, not assumed: the adapter's reading runs once on the
meta skeleton under a :class:`torch.overrides.TorchFunctionMode` that records every parameter it touches;
those are read from the files and the reading runs again on them. Where a reading still meets a meta tensor,
the whole attention module's parameters are read instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from condcli.errors import InputError
from condcli.loading.safetensors_stream import TensorFiles
from condcli.loading.tensor_shapes import check_stored, prefixes_of, skeleton

__all__ = ["StreamedModel", "on_meta", "safetensors_files", "skeleton"]

T = TypeVar("T")


class _Touched(TorchFunctionMode):
    """Records which of ``watched`` (tensor ids) any torch function received."""

    def __init__(self, watched: set[int]) -> None:
        super().__init__()
        self.watched = watched
        self.seen: set[int] = set()

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        for leaf in tree_leaves((args, kwargs or {})):
            if isinstance(leaf, torch.Tensor) and id(leaf) in self.watched:
                self.seen.add(id(leaf))
        return func(*args, **(kwargs or {}))


class StreamedModel:
    """A meta skeleton and the safetensors files of its weights."""

    def __init__(self, model: nn.Module, files: TensorFiles) -> None:
        self.model = model
        self.files = files
        self.prefixes = prefixes_of(model)
        self.names: dict[int, list[str]] = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            self.names.setdefault(id(p), []).append(name)

    def key_of(self, param: str) -> str | None:
        """The file key of the model's parameter ``param`` (None: not in the files)."""
        return self.files.key_of(param, self.prefixes)

    def touched(self, fn: Callable[[], object]) -> set[str]:
        """The parameters (one name each) ``fn`` reads, run on the meta skeleton."""
        mode = _Touched(set(self.names))
        with mode, torch.no_grad():
            fn()
        return {self.names[i][0] for i in mode.seen}

    def params_of(self, module: nn.Module) -> set[str]:
        return {self.names[id(p)][0] for p in module.parameters() if id(p) in self.names}

    @contextmanager
    def materialized(self, params: Sequence[str] | set[str]) -> Iterator[list[str]]:
        """The named parameters read from the files into the skeleton (every module sharing one gets it),
        put back on the meta device on exit. Yields the names that are not in the files (left on meta)."""
        saved: list[tuple[nn.Module, str, Any]] = []
        missing: list[str] = []
        try:
            for name in params:
                key = self.key_of(name)
                if key is None:
                    missing.append(name)
                    continue
                param = self.model.get_parameter(name)
                check_stored(key, self.files.tensors[key], param)  # before a byte of it is read
                tensor = self.files.read(key)
                if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                    bad = int((~torch.isfinite(tensor)).sum())
                    raise InputError(
                        f"weight '{key}' {tuple(tensor.shape)} holds {bad} NaN/Inf value(s) "
                        f"(from {self.files.tensors[key].file})",
                        "the weights file is damaged: re-export or replace it",
                    )
                real = nn.Parameter(tensor, requires_grad=False)
                for alias in self.names[id(param)]:
                    owner_path, _, leaf = alias.rpartition(".")
                    owner = self.model.get_submodule(owner_path)
                    saved.append((owner, leaf, owner._parameters[leaf]))
                    owner._parameters[leaf] = real
            yield missing
        finally:
            for owner, leaf, meta in reversed(saved):
                owner._parameters[leaf] = meta


def on_meta(*tensors: torch.Tensor | None) -> bool:
    return any(t is not None and t.device.type == "meta" for t in tensors)


def safetensors_files(folder: Path) -> list[Path] | None:
    """The safetensors file(s) transformers would read from an HF ``folder``; None where it would read
    another format (a .bin pickle: loaded the ordinary way)."""
    from condcli.loading.weights_files import folder_weights

    files, _ = folder_weights(folder, "hf")
    return files if all(f.suffix == ".safetensors" for f in files) else None
