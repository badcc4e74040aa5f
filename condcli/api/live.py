"""A model in memory and inputs given as Python objects, for the one-call API (:mod:`condcli.api`).

An ``nn.Module`` is loaded by the loader every MODEL goes through (:func:`condcli.loading.sources.load`),
as the user's own factory: this module holds it while the loader asks for it (:func:`held`), so it gets
the same checks, adapter, device, dtype and preprocessing as ``file.py:factory``. The module is put in eval
mode and moved to ``device``/``dtype`` in place, as a loaded model is. A ``tokenizer`` or ``processor``
given with it is read as the model's own preprocessing, as the files beside a model's weights are.

Inputs given as objects (a list of strings, a tensor batch, a dict of tensors, an iterable of either, such
as a DataLoader) become one :class:`~condcli.inputs.batches.InputStream`; a folder of images or a text
file is passed on as the ``images``/``text`` a CLI run reads.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from condcli.analysis.runs import RunOptions, RunSetup, Watch
from condcli.errors import InputError, ParameterTypeError, UsageError

if TYPE_CHECKING:
    from condcli.inputs.batches import Batch, InputStream, Preprocessing
    from condcli.loading.sources import LoadedModel

HELD = "condcli.api.live:held"  # the factory MODEL a module in memory is loaded as
_HELD: dict[str, nn.Module] = {}


def held(key: str) -> nn.Module:
    """The module in memory the loader asks for (the factory of :data:`HELD`)."""
    return _HELD[key]


def describe_module(module: nn.Module) -> str:
    """How a report names a module given in memory."""
    return f"{type(module).__name__} (in memory)"


def load_module(
    module: nn.Module, run: RunOptions, tokenizer: Any = None, processor: Any = None
) -> LoadedModel:
    """``module`` loaded as the CLI loads a factory MODEL, its weights as they are (checked finite),
    with ``tokenizer``/``processor`` as its preprocessing where given."""
    from condcli.loading.sources import load

    if not isinstance(module, nn.Module):
        raise UsageError(f"`model` is a {type(module).__name__}", "pass an nn.Module or a MODEL string")
    if run.weights == "random":
        raise UsageError(
            "`weights=random` asks for a new initialisation, and a module in memory is analysed as it is",
            "drop `weights`, or pass a MODEL string",
        )
    if (tokenizer is not None or processor is not None) and getattr(module, "config", None) is None:
        raise UsageError(
            f"`{'tokenizer' if tokenizer is not None else 'processor'}` goes with a Hugging Face model, and "
            f"{type(module).__name__} is not one",
            "pass ready `inputs` (a tensor batch, or an iterable of batches) for this module",
        )
    key = str(id(module))
    _HELD[key] = module
    try:
        options = replace(run.load_options(), model_args={"key": key}, weights="pretrained")
        loaded = load(HELD, options)
    finally:
        _HELD.pop(key, None)
    notes = [
        f"{type(module).__name__} given in memory: its weights as they are" if n.startswith("built by") else n
        for n in loaded.notes
    ]
    loaded = replace(loaded, spec=describe_module(module), notes=notes)
    if tokenizer is not None or processor is not None:
        loaded = replace(loaded, preprocessing=_given_preprocessing(loaded, tokenizer, processor))
    return loaded


def _given_preprocessing(loaded: LoadedModel, tokenizer: Any, processor: Any) -> Preprocessing:
    """The model's preprocessing from the ``tokenizer``/``processor`` given, read as files beside a model's
    weights are (saved to a temporary folder, so the objects given are not changed)."""
    from condcli.inputs.model_inputs import hf_preprocessing

    if tokenizer is not None and processor is not None:
        raise UsageError(
            "`tokenizer` and `processor` were both given", "give one: the processor, or the tokenizer"
        )
    given, param = (tokenizer, "tokenizer") if tokenizer is not None else (processor, "processor")
    if getattr(loaded.model, "config", None) is None or not hasattr(given, "save_pretrained"):
        raise UsageError(
            f"`{param}` goes with a Hugging Face model and must be a transformers {param}",
            "pass the model's own tokenizer or processor, or ready `inputs`",
        )
    with tempfile.TemporaryDirectory(prefix="condcli-given-") as folder:
        try:
            given.save_pretrained(folder)
        except Exception as e:  # the object's own code: whatever it raises is about the object given
            raise UsageError(
                f"`{param}`: its save_pretrained failed ({type(e).__name__}: {e})",
                f"pass a transformers {param} that can be saved, or ready `inputs`",
            ) from e
        pre = hf_preprocessing(folder, loaded.model, loaded.adapter.input_kind)
        pre.describe = pre.describe.replace(folder, f"the `{param}` given")
    return pre


@dataclass(frozen=True)
class GivenSetup(RunSetup):
    """A run whose inputs were given as objects (:func:`stream_of`) rather than read by the CLI's options."""

    given: Callable[[], InputStream] | None = None

    def inputs(self) -> InputStream:
        return self.given() if self.given is not None else super().inputs()


def with_inputs(setup: RunSetup, given: Callable[[], InputStream] | None) -> RunSetup:
    if given is None:
        return setup
    return GivenSetup(**{f.name: getattr(setup, f.name) for f in fields(RunSetup)}, given=given)


def setup_module(
    module: nn.Module, run: RunOptions, tokenizer: Any, processor: Any, watch: Watch | None = None
) -> RunSetup:
    """:func:`condcli.analysis.runs.setup_run` for a module in memory."""
    from condcli.analysis.common import resolve_lambda

    spec = run.input_spec()
    loaded = load_module(module, run, tokenizer, processor)
    return RunSetup(loaded, "in memory", resolve_lambda(run.lam, loaded.adapter), spec, watch or Watch())


# inputs given as objects ------------------------------------------------------------------------------------

KIND_OF_KEY = {
    "input_ids": "text",
    "pixel_values": "images",
    "input_values": "audio",
    "input_features": "audio",
}


def path_inputs(inputs: Any) -> dict[str, Path]:
    """A folder (→ ``images``) or a file (→ ``text``), as the CLI's options; {} for anything else."""
    if not isinstance(inputs, (str, Path)):
        return {}
    path = Path(inputs).expanduser()
    if path.is_dir():
        return {"images": path}
    if path.is_file() or str(inputs) == "-":
        return {"text": path}
    raise InputError(f"`inputs={inputs}`: no such file or folder", "give a folder of images or a text file")


def stream_of(
    inputs: Any,
    pre_of: Callable[[], Preprocessing],
    run: RunOptions,
    loaded_of: Callable[[], LoadedModel] | None = None,
) -> Callable[[], InputStream]:
    """A maker of the stream of ``inputs`` given as objects (texts, a tensor or dict batch, or an iterable of
    batches); ``max_samples`` and ``batch_size`` apply as to files. Each batch is checked against the model
    ``loaded_of`` gives (:func:`check_batch`) before it reaches the model."""
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(t, str) for t in inputs):
        texts = list(inputs)
        blank = next((i for i, t in enumerate(texts) if not t.strip()), None)
        if blank is not None:
            raise UsageError(
                f"`inputs` #{blank} is an empty string: there is no token to analyse",
                "give texts with at least one word, or leave the empty ones out",
            )
        return lambda: _text_stream(pre_of(), texts, run)
    if isinstance(inputs, (list, tuple)) and not inputs:
        raise UsageError("`inputs` is empty", "give at least one text or batch, or None for the default")
    if isinstance(inputs, (torch.Tensor, Mapping)):
        batches: Iterable[Any] = [inputs]
    elif isinstance(inputs, Iterable) and not isinstance(inputs, (str, bytes)):
        # an iterator is read once: kept, since the run reads the first batch twice (its proof, then all)
        batches = list(inputs) if iter(inputs) is inputs else inputs
    else:
        raise UsageError(
            f"`inputs` is a {type(inputs).__name__}",
            "give a folder of images, a text file, a list of strings, a tensor batch, a dict of tensors,"
            " or an iterable of batches (a DataLoader)",
        )
    return lambda: _batch_stream(batches, run, None if loaded_of is None else loaded_of())


def _text_stream(pre: Preprocessing, texts: list[str], run: RunOptions) -> InputStream:
    from condcli.inputs.batches import InputStream, Truncation, _tokenized
    from condcli.inputs.reading import byte_bound

    if pre.tokenizer is None:
        raise UsageError(
            "`inputs` are texts, but this model has no tokenizer",
            "pass `tokenizer` with a model in memory, or token ids as `inputs`",
        )
    spec = run.input_spec()
    chosen = texts[: spec.max_samples] if spec.max_samples else texts
    limit = pre.pad_to or pre.max_length

    def make(s: InputStream) -> Iterator[Batch]:
        s.truncation = Truncation("`inputs`", limit, byte_bound(limit))
        named = ((f"`inputs` #{i}", t) for i, t in enumerate(chosen))
        return _tokenized(pre, spec, named, s.tokenless, s.truncation)

    return InputStream("text", f"{len(chosen)} texts given as `inputs`", make, expected=len(chosen))


def _as_batch(item: Any) -> dict[str, torch.Tensor]:
    """One given batch as the model's keyword arguments: a dict of tensors, an integer tensor (token ids), a
    float tensor (pixels, or audio); a (inputs, labels) pair of a DataLoader is read as its inputs."""
    if isinstance(item, (tuple, list)) and item and isinstance(item[0], (torch.Tensor, Mapping)):
        item = item[0]
    if isinstance(item, Mapping):
        found = {str(k): v for k, v in item.items() if isinstance(v, torch.Tensor)}
        if not found:
            raise UsageError(
                "a batch in `inputs` holds no tensor", "give the model's keyword arguments as tensors"
            )
        return found
    if isinstance(item, torch.Tensor):
        if item.is_floating_point():
            return {"pixel_values": item}
        return {"input_ids": item, "attention_mask": torch.ones_like(item)}
    raise UsageError(
        f"a batch in `inputs` is a {type(item).__name__}",
        "give tensors, dicts of tensors, or (inputs, labels) pairs",
    )


def _batch_stream(batches: Iterable[Any], run: RunOptions, loaded: LoadedModel | None = None) -> InputStream:
    from condcli.inputs.batches import Batch, InputStream
    from condcli.inputs.images import padded_lengths

    spec = run.input_spec()

    def kind_of(first: dict[str, torch.Tensor]) -> str:
        return next((KIND_OF_KEY[k] for k in first if k in KIND_OF_KEY), "images")

    def make(s: InputStream) -> Iterator[Batch]:
        given = 0
        for item in batches:
            made = _as_batch(item)
            if loaded is not None:
                check_batch(made, loaded)
            size = _size(made)
            for start in range(0, size, spec.batch_size):
                if spec.max_samples is not None and given >= spec.max_samples:
                    return
                stop = min(size, start + spec.batch_size)
                if spec.max_samples is not None:
                    stop = min(stop, start + spec.max_samples - given)
                part = {k: v[start:stop] for k, v in made.items()}
                if given == 0:
                    s.kind = kind_of(made)  # type: ignore[assignment]
                yield Batch(
                    part, padded_lengths(part), [f"`inputs` #{given + i}" for i in range(stop - start)]
                )
                given += stop - start

    return InputStream("synthetic", "batches given as `inputs`", make)


def _forward_names(loaded: LoadedModel) -> set[str] | None:
    """The keyword arguments the model's forward takes by name; None where it cannot be told (a forward
    of ``**kwargs``, or an adapter that calls the model its own way)."""
    import inspect

    model = loaded.adapter.model
    hf = type(model).__module__.startswith("transformers.")
    if not hf and loaded.adapter.forward is not None:
        return None
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    if not hf and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None  # a Hugging Face model's **kwargs are options (output_attentions, …), never inputs
    return {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}


def _vocabulary(loaded: LoadedModel) -> int:
    """The number of token ids the model embeds (0: not known)."""
    get = getattr(loaded.adapter.model, "get_input_embeddings", None)
    table = get() if callable(get) else None
    found = getattr(table, "num_embeddings", None)
    return int(found) if isinstance(found, int) else int(loaded.preprocessing.vocab_size or 0)


def check_batch(made: Mapping[str, torch.Tensor], loaded: LoadedModel) -> None:
    """A batch given in ``inputs`` the model can take: only keyword arguments its forward names, token ids
    as integers of shape [batch, tokens] inside its vocabulary, pixels with a batch dimension; else one
    :class:`UsageError` naming `inputs`."""
    takes = _forward_names(loaded)
    name = type(loaded.adapter.model).__name__
    if takes is not None:
        unknown = sorted(set(made) - takes)
        if unknown:
            known = sorted(k for k in takes if k in KIND_OF_KEY or k == "attention_mask")
            raise UsageError(
                f"a batch in `inputs` has the key(s) {', '.join(map(repr, unknown))}, which {name}.forward "
                "does not take",
                f"name the tensors as its keyword arguments ({', '.join(known or sorted(takes)[:6])})",
            )
    ids = made.get("input_ids")
    if ids is not None:
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise UsageError(
                f"`inputs`: the token ids are {ids.dtype}", "give token ids as an integer tensor"
            )
        if ids.ndim != 2:
            raise UsageError(
                f"`inputs`: token ids of shape {list(ids.shape)}, where [batch, tokens] was expected",
                "give a 2-D tensor (one sample: ids.unsqueeze(0))",
            )
        vocab = _vocabulary(loaded)
        low, high = (int(ids.min()), int(ids.max())) if ids.numel() else (0, 0)
        if low < 0 or (vocab and high >= vocab):
            bad = low if low < 0 else high
            raise UsageError(
                f"`inputs`: token id {bad} is outside the vocabulary of {name} ({vocab} entries: 0 … "
                f"{vocab - 1})",
                "give ids that the model's own tokenizer makes",
            )
    pixels = made.get("pixel_values")
    if pixels is not None and pixels.ndim not in (4, 5):
        raise UsageError(
            f"`inputs`: pixels of shape {list(pixels.shape)}, where [batch, channels, height, width] was "
            "expected",
            "give a 4-D tensor (one image: x.unsqueeze(0))",
        )


def _size(made: Mapping[str, torch.Tensor]) -> int:
    sizes = {int(v.shape[0]) for v in made.values() if v.ndim}
    if len(sizes) != 1:
        raise UsageError(
            f"the tensors of a batch in `inputs` disagree on the batch size ({sorted(sizes)})",
            "give tensors whose first dimension is the batch",
        )
    return sizes.pop()


def split_inputs(inputs: Any) -> tuple[dict[str, Path], Any]:
    """(the ``images``/``text`` paths the CLI would read, the inputs given as objects or None)."""
    if inputs is None:
        return {}, None
    found = path_inputs(inputs)
    return (found, None) if found else ({}, inputs)


def layers_text(layers: str | Sequence[int] | None) -> str | None:
    """``layers`` as the CLI's text: "all", "none", "0,3,-1"; an index or a list of indices is joined.
    Anything else (3.5, [1.5], True) is a :class:`UsageError` naming `layers`."""
    if layers is None or isinstance(layers, str):
        return layers
    if _index(layers):
        return str(int(layers))  # type: ignore[call-overload]  # an integer (numpy's too)
    if isinstance(layers, Sequence) and all(_index(i) for i in layers):
        return ",".join(str(int(i)) for i in layers) if layers else "none"
    raise ParameterTypeError(
        f"`layers={layers!r}` is not a choice of layers",
        "give all, none, an index, or a list of indices such as [0, -1]",
    )


def _index(value: object) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
