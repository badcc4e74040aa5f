"""Pieces every analysis command shares: the λ a run uses, layer selection, model and input descriptions."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import sys
from collections.abc import Callable
from functools import cache

import torch

from condcli.adapters.base import Adapter
from condcli.conditioning import Conditioning
from condcli.errors import InputError
from condcli.inputs.batches import InputStream
from condcli.loading.sources import LoadedModel
from condcli.reports.envelope import EmbeddingReport, InputsInfo, ModelInfo, Settings

DEFAULT_LAMBDA = 10.0  # the paper's λ (grid 1–20, best ≈ 10)

Progress = Callable[[int], None]  # called with the number of samples just analysed


def check_lambda(value: float, param: str = "lam") -> float:
    """A λ the user gave (``param`` names it in the error): any finite number ≥ 0, −0 read as 0.

    No upper limit: κ(X + λI_k) is computed for every finite λ (condcli.spectra scales huge ones). Where λ is
    fed to the model (a conditioned forward) it is added in the model's dtype, and a λ that overflows the
    model there is reported by that forward.
    """
    if not (math.isfinite(value) and value >= 0):
        raise InputError(f"`{param}` must be a finite number ≥ 0, got {value}", f"e.g. `{param}=10`")
    return value + 0.0


def conditioned_overflow(conditioning: Conditioning, dtype: torch.dtype) -> InputError:
    """The error of a conditioned forward that went non-finite where the plain forward of the same batch did
    not: the conditioning (a huge λ, added in the model's own dtype) overflowed the model."""
    name = str(dtype).removeprefix("torch.")
    shift = conditioning.mode == "shift"
    rerun = "run the model in float64 (`dtype=float64`)" if dtype != torch.float64 else ""
    hint = ", or ".join(part for part in ("use a smaller λ" if shift else "", rerun) if part)
    return InputError(
        f"the conditioned forward ({conditioning.describe()} fed to the blocks) gives NaN/Inf in {name}, the "
        f"plain forward does not: the {'shift' if shift else 'correction'} overflows the model",
        hint or "report it with the model name",
    )


def resolve_lambda(given: float | None, adapter: Adapter) -> float:
    """The ``lam`` given, else the λ the model was trained with (its own shift), else the paper's 10."""
    if given is not None:
        return check_lambda(given, "lam")
    if adapter.builtin is not None and adapter.builtin.mode == "shift":
        return adapter.builtin.lam
    return DEFAULT_LAMBDA


def model_info(loaded: LoadedModel, model_from: str) -> ModelInfo:
    return ModelInfo(
        spec=loaded.spec,
        model_from=model_from,
        family=loaded.family,
        source=loaded.source,
        weights=loaded.weights,
        num_layers=loaded.num_layers,
        device_map=loaded.device_map,
        quantization=None if loaded.quantization is None else loaded.quantization.to_json(),
    )


def inputs_info(loaded: LoadedModel, inputs: InputStream, tokens: int, dim: int) -> InputsInfo:
    return InputsInfo(
        kind=inputs.kind,
        description=inputs.description,
        preprocessing=loaded.preprocessing.describe,
        count=inputs.count,
        tokens=tokens,
        dim=dim,
        skipped=inputs.skipped + inputs.tokenless.count,
    )


def settings(
    loaded: LoadedModel,
    lam: float,
    seed: int,
    *,
    conditioned_forward: bool,
    heads: bool,
    target_kappa: float | None = None,
) -> Settings:
    """The report's settings section: λ, the dtype and device the model ran in, the seed."""
    return Settings(
        lam=lam,
        dtype=str(loaded.dtype).removeprefix("torch."),
        device=str(loaded.device),
        seed=seed,
        conditioned_forward=conditioned_forward,
        heads=heads,
        target_kappa=target_kappa,
    )


def precision_note(below: int, total: int, dtype: str, what: str = "X") -> str | None:
    """The docs/math.md#spectra hint when samples are below the capture dtype's resolution."""
    if not below:
        return None
    rerun = " — rerun with `dtype=float64` to resolve them" if dtype != "float64" else ""
    return (
        f"{below} of {total} samples have {what} with σ_k below {dtype} resolution: their κ is a floor "
        f"set by rounding noise, not a measurement{rerun}"
    )


EXACT_LOOKUP_NOTE = "X is an exact lookup of the stored token embeddings: no rounding from the capture dtype"


def embedding_notes(emb: EmbeddingReport, total: int) -> list[str]:
    """The notes X's precision earns: an exact lookup (judged at float64), and samples below resolution."""
    notes = (
        [f"{EXACT_LOOKUP_NOTE} ({emb.capture_dtype}); its flag is judged at float64"]
        if emb.exact_lookup
        else []
    )
    below = precision_note(len(emb.below_precision_samples), total, emb.resolution_dtype)
    repeated = len(emb.repeated_rows_samples)
    if repeated:
        notes.append(
            f"{repeated} of {total} samples repeat a row of X exactly ({emb.repeated_reason()}): their κ(X) "
            "is inf exactly, not a floor; κ_distinct(X), κ over the distinct rows, is the number to read and "
            "to gate (`max_kappa_distinct`)"
        )
    return notes + ([below] if below else [])


@cache
def _libc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return None
    return trim


def release_memory() -> None:
    """Hand the heap pages freed by the last batch back to the OS (glibc ``malloc_trim``).

    Without it glibc keeps them, fragmented, and peak RSS grows with every ViT-B batch although nothing is
    retained (measured: +100 MiB per batch of 8 over 64 images; flat with it, at ≈ 5% more time). This is
    what keeps memory flat in the number of samples.
    """
    trim = _libc_trim()
    if trim is not None:
        trim(0)
