"""MODEL spec → :class:`LoadedModel`: a model in eval mode, its adapter and its own preprocessing
(docs/math.md#cli).

MODEL may be a timm name (``vit_base_patch16_224``, ``timm:NAME``), a Hugging Face id (``hf:ID``,
``org/name`` or a bare id), a local folder (HF layout: config.json with ``model_type``; timm layout:
config.json with ``architecture``, as ``timm.models.save_for_hf`` writes), a .safetensors file inside such
a folder, the name of a shipped sample checkpoint, a GGUF file (``model.gguf``: :mod:`condcli.loading.gguf`),
or the user's own code: ``path/to/file.py:factory`` or ``package.module:factory``
(:mod:`condcli.loading.factory`; naming a file runs it). :mod:`condcli.loading.names` decides which a name is.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from condcli.adapters import Adapter, adapter_for, condition_model
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Preprocessing
from condcli.inputs.model_inputs import hf_preprocessing
from condcli.inputs.preprocessing import (
    timm_preprocessing,
)
from condcli.loading import gguf as gguf_files
from condcli.loading import hub
from condcli.loading.big_model import (
    Placement,
    Streamed,
    describe,
    dispatch,
    main_device,
    offloaded_weights,
    placement,
    quiet,
    stream,
    summary,
)
from condcli.loading.checkpoints import load_into
from condcli.loading.devices import resolve_device, resolve_dtype
from condcli.loading.factory import build_factory, describe_call, factory_preprocessing
from condcli.loading.hf import analysed_module, hf_model, streams
from condcli.loading.model_config import check_hf_config, check_raw_hf, check_timm_folder
from condcli.loading.model_config import flavour as flavour_of
from condcli.loading.names import ModelSpec, suggest
from condcli.loading.names import parse_spec as parse_spec  # where callers have always found it
from condcli.loading.samples import builtin_conditioning
from condcli.loading.tensor_shapes import check_hf_folder
from condcli.loading.weights_files import (
    check_finite,
    check_folder_weights,
    check_real,
    read_state_dict,
)

SourceKind = Literal["timm", "hf", "local"]
Weights = Literal["pretrained", "random", "file"]


@dataclass(frozen=True)
class LoadOptions:
    # None: the source's own default — pretrained for timm/HF/local models, random for a factory (whose
    # weights are what it builds; condcli fetches nothing for it, and `pretrained` only labels them so)
    weights: Literal["pretrained", "random"] | None = None
    checkpoint: Path | None = None
    seed: int = 0
    device: str = "auto"
    dtype: str | None = None  # None: the model's own dtype
    trust_remote_code: bool = False
    model_args: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments of a factory MODEL
    adapter: Path | None = None  # a declared adapter (.toml) instead of the family adapter
    device_map: str | None = None  # spread the model over devices (auto, balanced, …); None: all on `device`
    max_memory: str | None = None  # per-device budgets for `device_map`, e.g. "GPU0=20GiB,cpu=60GiB,disk"


@dataclass
class LoadedModel:
    """Everything the analysis needs about one model."""

    spec: str
    source: SourceKind
    weights: Weights
    model: nn.Module
    adapter: Adapter
    preprocessing: Preprocessing
    device: torch.device
    dtype: torch.dtype
    notes: list[str] = field(default_factory=list)
    device_map: dict[str, Any] | None = None  # the placement used (big_model.summary); None: all on `device`
    quantization: gguf_files.Quantization | None = None  # the weights were dequantized from a GGUF file
    top: nn.Module | None = None  # the whole model as loaded (its output head too), where `model` is a part

    @property
    def family(self) -> str:
        return self.adapter.family

    @property
    def num_layers(self) -> int:
        return len(self.adapter.layers)


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def _timm_model(spec: ModelSpec, options: LoadOptions, pretrained: bool) -> nn.Module:
    import timm

    name = spec.target if spec.kind == "timm" else f"local-dir:{spec.target}"
    if spec.kind == "timm" and not timm.is_model(name):
        raise InputError(f"unknown timm model {name!r}", suggest(name))
    with _seeded(options.seed), hub.loading(spec.text, pretrained):
        model: nn.Module = timm.create_model(name, pretrained=pretrained)
    return model


def _hf_config(spec: ModelSpec, options: LoadOptions) -> Any:
    from transformers import AutoConfig

    hub_id = hub.HubId(spec.target, spec.unprefixed_hub) if spec.kind == "hf" else None
    with hub.loading(f"the config of {spec.text}", spec.kind == "hf", hub.CONFIG_FIX, hub_id):
        return AutoConfig.from_pretrained(spec.target, trust_remote_code=options.trust_remote_code)


def _hf_model(
    spec: ModelSpec,
    options: LoadOptions,
    config: Any,
    pretrained: bool,
    streamed: Streamed | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[nn.Module, str]:
    if streamed is None:
        with _seeded(options.seed), hub.loading(spec.text, pretrained and spec.kind == "hf"):
            return hf_model(spec.target, config, pretrained, options.trust_remote_code)
    try:
        with _seeded(options.seed), hub.loading(spec.text, spec.kind == "hf"), quiet():
            return hf_model(spec.target, config, True, options.trust_remote_code, **streamed.kwargs(dtype))
    except BaseException:
        streamed.failed()
        raise


def _apply_builtin_conditioning(model: nn.Module, spec: ModelSpec) -> list[str]:
    """Re-apply the conditioning a sample was trained with (metadata.json); the shift has no weights."""
    if spec.kind != "local" or spec.gguf is not None:
        return []
    found = builtin_conditioning(Path(spec.target))
    if found is None:
        return []
    lam, mode = found
    condition_model(model, lam=lam, mode="shift" if mode == "shift" else "correction")
    return [
        f"trained with conditioned tokens: metadata.json re-applies λ = {lam:g} ({mode}) at the embedding"
    ]


def _load_checkpoint(model: nn.Module, analysed: nn.Module, path: Path, arch: str) -> None:
    """Weights from ``path`` into the whole model, else (a base model's state dict) into the analysed part."""
    sd = read_state_dict(path)
    try:
        load_into(model, sd, path, arch)
    except InputError as whole:
        if analysed is model:
            raise
        try:
            load_into(analysed, sd, path, arch)
        except InputError:
            raise whole from None


def _hf_preprocessing(
    source: str | None, analysed: nn.Module, adapter: Adapter, trust: bool
) -> Preprocessing:
    """The HF model's own preprocessing for what it reads: pixels, video clips, audio or tokens."""
    return hf_preprocessing(source, analysed, adapter.input_kind, trust)


def _is_transformers_model(model: nn.Module) -> bool:
    """A Hugging Face PreTrainedModel (transformers is imported already if the factory built one)."""
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(model, transformers.PreTrainedModel)


def _factory_model(spec: ModelSpec, options: LoadOptions, weights: Weights) -> tuple[nn.Module, str]:
    """Run the factory (its file or module imported, torch seeded with ``seed``) and say how it was built."""
    assert spec.factory is not None
    with _seeded(options.seed):
        model = build_factory(spec.factory, options.model_args)
    call = f"built by {describe_call(spec.factory, options.model_args)} from {spec.factory.where}"
    if weights == "file":
        return model, f"{call}; weights from the checkpoint"
    if weights == "pretrained":
        return model, f"{call}: weights as it returned them, labelled pretrained as asked (nothing fetched)"
    return model, f"{call}, torch seeded with {options.seed}: its own initialisation (nothing fetched)"


def _gguf_model(
    path: Path, options: LoadOptions, pretrained: bool, device: torch.device, dtype: torch.dtype | None
) -> tuple[nn.Module, str]:
    """A GGUF file's model (its header checked first), dequantized, or random weights of its shapes."""
    config = gguf_files.config(path, options.trust_remote_code)
    gguf_files.check_size(path, config, device, dtype)
    with _seeded(options.seed):
        return gguf_files.model(path, config, pretrained)


def load(text: str, options: LoadOptions | None = None) -> LoadedModel:
    """Load MODEL ``text`` per ``options``: eval mode, on the chosen device, with its adapter."""
    options = options or LoadOptions()
    if options.weights not in (None, "pretrained", "random"):
        raise UsageError(f"`weights={options.weights!r}` is not known", "use `weights=pretrained` or random")
    spread_to = placement(options.device_map, options.max_memory, options.device)
    device = resolve_device(
        "cpu" if spread_to is not None else options.device
    )  # dispatched after it is built
    dtype = resolve_dtype(options.dtype)
    spec = parse_spec(text)
    if options.model_args and spec.kind != "factory":
        raise UsageError(
            f"`model_args` given, but {spec.text} is not a factory",
            "keyword arguments go to a MODEL written path/to/file.py:factory or package.module:factory",
        )
    from_file = options.checkpoint is not None or spec.weights_file is not None
    choice = options.weights or ("random" if spec.kind == "factory" else "pretrained")
    weights: Weights = "file" if from_file else choice
    pretrained = choice == "pretrained" and not from_file
    source: str | None = spec.target if spec.kind not in ("timm", "factory") else None
    notes: list[str] = [] if spec.note is None else [spec.note]
    loaded_from = spec.text  # where the weights come from, for an error about them
    not_real: dict[str, str] = {}  # a folder's tensors that are not real floating point
    shards: dict[str, str] = {}  # a sharded folder's tensor name → file
    flavour: Literal["timm", "hf", "factory"]
    streamed: Streamed | None = None  # pretrained HF weights read straight onto the device map
    header = None if spec.gguf is None else gguf_files.read(spec.gguf)
    quantization = None
    if spec.kind == "factory":
        model, built = _factory_model(spec, options, weights)
        notes.append(built)
        flavour = "hf" if _is_transformers_model(model) else "factory"
    elif header is not None:
        model, built = _gguf_model(header.path, options, pretrained, device, dtype)
        notes.append(built)
        flavour, source, loaded_from = "hf", None, str(header.path)
        if pretrained:
            quantization = gguf_files.quantization(header)
            notes.append(quantization.describe())
    else:
        flavour = spec.kind if spec.kind != "local" else flavour_of(Path(spec.target))
        folder = Path(spec.target) if spec.kind == "local" else None
        config: Any = None
        if flavour == "timm" and folder is not None:
            check_timm_folder(folder, device, dtype)
        elif flavour == "hf":
            if folder is not None:
                check_raw_hf(folder)
            config = _hf_config(spec, options)
            where = str(folder / "config.json") if folder is not None else f"the config.json of {spec.text}"
            streaming = spread_to is not None and pretrained and streams(config) is not None
            check_hf_config(
                config, where, spec.target, options.trust_remote_code, device, dtype, spill=streaming
            )
            if streaming and spread_to is not None:
                streamed = stream(streams(config), config, spread_to, dtype)
        if folder is not None and pretrained:
            found = check_folder_weights(folder, flavour)
            loaded_from, not_real, shards = found.source, found.not_real, found.shards
            if flavour == "hf":  # each stored tensor against the model's own, as `weights` checks it
                check_hf_folder(config, options.trust_remote_code, found.tensors)
        if flavour == "timm":
            model = _timm_model(spec, options, pretrained)
            pre = timm_preprocessing(model)
        else:
            model, loaded_as = _hf_model(spec, options, config, pretrained, streamed, dtype)
            notes.append(loaded_as)
    analysed, analysed_notes = analysed_module(model) if flavour == "hf" else (model, [])
    placed = None if streamed is None else streamed.done(analysed)
    checkpoint = options.checkpoint or spec.weights_file
    if checkpoint is not None:
        _load_checkpoint(model, analysed, Path(checkpoint), spec.text)
        loaded_from = str(checkpoint)
    if weights != "random":
        check_real(model, not_real)
        check_finite(model, loaded_from, shards=shards)
    notes += _apply_builtin_conditioning(model, spec)
    model.eval()
    if dtype is not None and streamed is None:  # streamed: read in that dtype
        model.to(dtype)
        if weights != "random":
            check_finite(model, loaded_from, f"the cast to {dtype}".replace("torch.", ""), shards)
    if spread_to is None:
        model.to(device)
    adapter = adapter_for(analysed, options.adapter)
    spread = None
    if spread_to is not None:
        adapter, spread = _spread(analysed, adapter, spread_to, notes, placed)
    if flavour == "hf":
        pre = _hf_preprocessing(source, analysed, adapter, options.trust_remote_code)
        if header is not None:  # the tokenizer the file carries
            pre = gguf_files.preprocessing(header, pre, options.trust_remote_code)
    elif flavour == "factory":
        pre = factory_preprocessing(analysed, spec.text)
    return LoadedModel(
        spec=spec.text,
        source="timm" if spec.kind == "timm" else "hf" if spec.kind == "hf" else "local",
        weights=weights,
        model=analysed,
        adapter=adapter,
        preprocessing=pre,
        device=device if spread_to is None else main_device(analysed),
        dtype=next(analysed.parameters()).dtype,
        notes=[*notes, *analysed_notes, *adapter.notes],
        device_map=spread,
        quantization=quantization,
        top=model,
    )


def _spread(
    analysed: nn.Module,
    adapter: Adapter,
    where: Placement,
    notes: list[str],
    placed: dict[str, str] | None = None,
) -> tuple[Adapter, dict[str, Any]]:
    """Dispatch the analysed module over devices (its blocks whole; ``placed``: read onto them already): the
    adapter reading offloaded weights back for its W slices, and the report's record of the placement."""
    found = placed if placed is not None else dispatch(analysed, where, [s.name for s in adapter.layers])
    device = main_device(analysed)
    notes.append(f"device map {where.strategy}: {describe(found)}; the analysis runs on {device}")
    layers = tuple(replace(s, weights=offloaded_weights(analysed, s, device)) for s in adapter.layers)
    return replace(adapter, layers=layers), summary(where, found)
