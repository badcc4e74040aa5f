"""The training callback's probe batch as a file beside the checkpoints, and ``track``'s inputs from it.

A training callback (:class:`condcli.monitor.ConditioningCallback`) measures on one fixed probe batch. It
saves that batch as :data:`PROBE_FILE` (:func:`save_probe`): the tensors it fed the analysed module (its first
``max_samples`` samples, the keys that module reads), on the CPU, in safetensors. ``condcli track`` finds it
beside the checkpoints (:func:`find_probe`) and, when no ``text`` or ``images`` is given, analyses every
checkpoint on it (:func:`probe_stream`), fed whole in one batch as the callback fed it: the values are then
the ones the callback logged at the same steps. Each text sample's length comes from its attention mask, as
the callback took it (:func:`right_padded_lengths`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import torch

from condcli.errors import InputError
from condcli.inputs.batches import Batch, InputStream, Preprocessing

PROBE_FILE = "condcli_probe.safetensors"
FORMAT = "condcli probe batch"  # the file's ``format`` metadata
VERSION = "1"
CHECKPOINT_PREFIX = (
    "checkpoint-"  # an HF Trainer's checkpoint folders: the run folder above holds a probe too
)


def right_padded_lengths(mask: torch.Tensor, main: torch.Tensor, what: str) -> torch.Tensor:
    """Real tokens per sample of a right-padded (B, N) attention ``mask`` of the main input ``main``; one
    InputError naming ``what`` (e.g. "batch") for another shape, a 0 before a 1, or a sample with no token."""
    if mask.dim() != 2 or tuple(mask.shape) != tuple(main.shape[:2]):
        raise InputError(
            f"{what} attention_mask has shape {tuple(mask.shape)}, "
            f"not (samples, tokens) {tuple(main.shape[:2])}",
            "pass the tokenizer's 2-D attention mask",
        )
    real = mask != 0
    lengths = real.sum(dim=1)
    prefix = torch.arange(mask.shape[1], device=mask.device)[None, :] < lengths[:, None]
    if not torch.equal(real, prefix):
        raise InputError(
            f"{what} is not padded on the right: a sample's attention mask has a 0 before a 1",
            "pad the probe batch on the right (tokenizer.padding_side = 'right')",
        )
    if int(lengths.min()) < 1:
        raise InputError(f"{what} has a sample with no tokens (its attention mask is all 0)", "drop it")
    return lengths.cpu()


def probe_bytes(inputs: Mapping[str, torch.Tensor], main: str, source: str) -> bytes:
    """The probe file's content: ``inputs`` (detached, on the CPU, contiguous) with metadata naming the main
    input and where the samples came from (``source``, e.g. "the evaluation dataset")."""
    from safetensors.torch import save

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in inputs.items()}
    return bytes(
        save(tensors, metadata={"format": FORMAT, "version": VERSION, "main": main, "source": source})
    )


def save_probe(folder: Path, data: bytes) -> Path:
    """Write the probe file's ``data`` (:func:`probe_bytes`) into ``folder``, whole or not at all."""
    from condcli.outpaths import write_file

    target = folder / PROBE_FILE
    write_file(target, data, f"the probe batch {target}")
    return target


def _candidates(folder: Path) -> list[Path]:
    here = [folder / PROBE_FILE]
    return here + ([folder.parent / PROBE_FILE] if folder.name.startswith(CHECKPOINT_PREFIX) else [])


def find_probe(folders: Sequence[Path]) -> tuple[Path, ...]:
    """The probe files of ``folders`` (checkpoint folders): each one's own, else, for an HF Trainer's
    ``checkpoint-*`` folder, its run folder's. Empty where none has one. The files found must hold the same
    batch (one training run measured on one probe); otherwise one InputError naming two of them."""
    found: list[Path] = []
    for folder in folders:
        path = next((p for p in _candidates(folder) if p.is_file()), None)
        if path is not None and path not in found:
            found.append(path)
    if len(found) > 1:
        first = read_probe(found[0])
        for other in found[1:]:
            tensors = read_probe(other)
            if tensors.keys() != first.keys() or any(not torch.equal(first[k], tensors[k]) for k in first):
                raise InputError(
                    f"{found[0]} and {other} hold different probe batches: these checkpoints were not "
                    "measured on one probe",
                    "track the checkpoints of one training run, or give `text` or `images` for all of them",
                )
    return tuple(found)


def _metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def read_probe(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a probe file (one InputError for a file that is not one)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    hint = f"delete {path} to analyse the default inputs, or give `text` or `images`"
    try:
        meta = _metadata(path)
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise InputError(f"{path} cannot be read as a probe batch ({e})", hint) from None
    if meta.get("format") != FORMAT or not tensors:
        raise InputError(f"{path} is not a condcli probe batch (its metadata says no)", hint)
    return tensors


def probe_stream(
    path: Path, pre: Preprocessing, max_samples: int | None, batch_size: int | None
) -> InputStream:
    """The probe batch of ``path`` as ``track``'s inputs: its first ``max_samples`` samples (None: all), in
    batches of ``batch_size`` (None: in one batch, as the callback fed it)."""
    tensors = read_probe(path)
    main = _metadata(path).get("main", "")
    if main not in tensors:
        raise InputError(f"{path} has no main input {main!r}", "save the probe batch again by training")
    total = int(tensors[main].shape[0]) if tensors[main].dim() else 0
    count = total if max_samples is None else min(total, max_samples)
    uneven = [k for k, v in tensors.items() if v.dim() == 0 or int(v.shape[0]) != total]
    if count == 0 or uneven:
        raise InputError(f"{path} holds no samples, or entries of unequal sample counts", "save it again")
    mask = tensors.get("attention_mask")
    lengths = None
    if mask is not None and pre.modality == "text":
        lengths = right_padded_lengths(mask[:count], tensors[main][:count], f"the probe batch {path}")
    size = count if batch_size is None else batch_size

    def make(stream: InputStream) -> Iterator[Batch]:
        for start in range(0, count, size):
            end = min(count, start + size)
            yield Batch(
                {k: v[start:end] for k, v in tensors.items()},
                None if lengths is None else lengths[start:end],
                [f"probe sample #{i}" for i in range(start, end)],
            )

    kind = pre.modality
    description = f"the training callback's probe batch ({count} of its {total} samples, {path})"
    return InputStream(kind=kind, description=description, make=make, expected=count)
