"""``condcli weights`` as a library call: every weight-only number, without inputs or a forward
(docs/math.md#the-embedding-table, #layers): κ(E) and its spectrum, κ of an untied output head, per layer
κ(W_Q), κ(W_K), κ(W_V), κ(W_O) whole and per head, and μ(LA)'s weight factor κ(W_Q^h)κ(W_K^h)κ(W_V^h).

An HF model folder (or a hub snapshot in the local cache) whose weights are safetensors is read tensor by
tensor (:mod:`condcli.analysis.weights_stream`), so the model never sits in memory whole. Every other MODEL
(timm names, samples, factories, .bin folders, a ``checkpoint``, random weights) is loaded as every command
loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from condcli.adapters import Adapter, adapter_for
from condcli.adapters.base import HeadWeights, LayerSpec
from condcli.analysis.embedding_table import (
    Method,
    embedding_table_of,
    spectrum_report,
    tables_of,
)
from condcli.analysis.layers import weight_kappas_of
from condcli.analysis.output_projection import find_output_projection, output_heads
from condcli.analysis.runs import RunOptions
from condcli.analysis.weights_stream import StreamedModel, on_meta, safetensors_files, skeleton
from condcli.errors import InputError
from condcli.loading.tensor_shapes import check_model, check_stored
from condcli.reports.envelope import ModelInfo
from condcli.reports.table import EmbeddingTableReport
from condcli.reports.weights import LayerWeights, WeightsReport
from condcli.spectra import condition_number

UNPROVEN = (
    "the generic adapter's reading of Q/K/V is not proven without a forward (`condcli spectrum` proves it "
    "on its first batch): layers marked generic (unverified)"
)


@dataclass
class WeightsSource:
    """A model whose weights are to be read: the whole model (a meta skeleton where ``streamed``), the
    adapter of its analysed module, and where it came from."""

    top: nn.Module
    adapter: Adapter
    info: ModelInfo
    streamed: StreamedModel | None = None
    notes: list[str] = field(default_factory=list)


def _hub_snapshot(repo: str) -> Path | None:
    """The local cache's snapshot folder of hub id ``repo``, or None where it is not cached whole."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, local_files_only=True))
    except Exception:  # not cached, or not a repo id: loaded the ordinary way, which says why
        return None


def _streamable(run: RunOptions, text: str) -> tuple[Path, list[Path]] | None:
    """(folder, safetensors files) where MODEL ``text`` can be read tensor by tensor, else None."""
    from condcli.loading.model_config import flavour
    from condcli.loading.names import parse_spec

    spec = parse_spec(text)
    if run.weights == "random" or run.checkpoint is not None or spec.factory is not None or run.model_args:
        return None
    if spec.kind == "hf":
        folder = _hub_snapshot(spec.target)
    elif spec.kind == "local":
        folder = Path(spec.target)
    else:
        return None
    if folder is None or not (folder / "config.json").is_file() or flavour(folder) != "hf":
        return None
    if spec.weights_file is not None:
        return (folder, [spec.weights_file]) if spec.weights_file.suffix == ".safetensors" else None
    files = safetensors_files(folder)
    return None if files is None else (folder, files)


def open_source(run: RunOptions, config: Path | None = None) -> WeightsSource:
    """MODEL of ``run`` (else ``[tool.condcli] model``, else the shipped sample), ready to read."""
    from condcli.loading.project_config import resolve_model

    project = config or Path.cwd() / "pyproject.toml"
    text, model_from = resolve_model(run.model, project)
    found = _streamable(run, text)
    if found is not None:
        return _streamed_source(run, text, model_from, *found)
    return _loaded_source(run, text, model_from, project)


def _streamed_source(
    run: RunOptions, text: str, model_from: str, folder: Path, files: list[Path]
) -> WeightsSource:
    from transformers import AutoConfig

    from condcli.loading import hub
    from condcli.loading.hf import analysed_module
    from condcli.loading.model_config import check_raw_hf
    from condcli.loading.safetensors_stream import TensorFiles

    check_raw_hf(folder)
    tensors = TensorFiles(files)  # every header checked before anything is built
    with hub.loading(f"the config of {text}", False, hub.CONFIG_FIX):
        config = AutoConfig.from_pretrained(str(folder), trust_remote_code=run.trust_remote_code)
    top = skeleton(config, run.trust_remote_code)
    check_model(top, tensors.tensors)  # every stored tensor against the model's own, before any number
    analysed, _ = analysed_module(top)
    adapter = adapter_for(analysed, run.adapter)
    info = ModelInfo(
        text,
        model_from,
        adapter.family,
        "hf" if text.startswith("hf:") else "local",
        "pretrained",
        len(adapter.layers),
    )
    count = f"{len(files)} safetensors file{'s' * (len(files) > 1)}"
    note = f"weights read tensor by tensor from {count}: the model was never loaded whole"
    return WeightsSource(top, adapter, info, StreamedModel(top, tensors), [note])


def _loaded_source(run: RunOptions, text: str, model_from: str, project: Path) -> WeightsSource:
    from dataclasses import replace

    from condcli.loading.project_config import configured_model_args
    from condcli.loading.sources import load

    options = replace(run.load_options(), device="cpu", device_map=None, max_memory=None)
    configured = configured_model_args(run.model, project)
    if configured:
        options = replace(options, model_args={**configured, **options.model_args})
    loaded = load(text, options)
    # the whole model where the loader keeps it (an HF task model's head lives outside the base model)
    top = getattr(loaded, "top", None) or loaded.model
    info = ModelInfo(text, model_from, loaded.family, loaded.source, loaded.weights, loaded.num_layers)
    notes = [n for n in loaded.notes if not n.startswith(("P:", "κ(LA)", "μ(LA)"))]
    if top is loaded.model and not _has_head(top) and getattr(top, "base_model", None) is top:
        notes.append("the loader kept the base model only: an output head (lm_head) could not be examined")
    return WeightsSource(top, loaded.adapter, info, None, notes)


def _has_head(model: nn.Module) -> bool:
    from condcli.analysis.embedding_table import has_output_head

    return has_output_head(model)


def _embedding_table(src: WeightsSource, method: Method) -> EmbeddingTableReport | None:
    streamed = src.streamed
    if streamed is None:
        return embedding_table_of(src.top, method)
    table, head, tied = tables_of(src.top)
    if table is None:
        return None

    def report(name: str, w: torch.Tensor) -> Any:
        key = streamed.key_of(name)
        if key is None:
            raise InputError(
                f"weight '{name}' is not in the weights files", "re-export the model (save_pretrained)"
            )
        check_stored(key, streamed.files.tensors[key], w)
        shape = (int(w.shape[0]), int(w.shape[1]))
        return spectrum_report(lambda a, b: streamed.files.rows(key, a, b), shape, key, method)

    e = report(*table)
    h = None if head is None else report(*head)
    return EmbeddingTableReport.of(e, tied=tied if (tied or head is not None) else None, lm_head=h)


def _layer(
    spec: LayerSpec,
    w: HeadWeights,
    model: nn.Module,
    read_wo: Callable[[], torch.Tensor] | None,
    wo_note: str,
) -> LayerWeights:
    kappas = weight_kappas_of({spec.index: w})[spec.index]
    wo = wo_heads = None
    if read_wo is not None:
        m = read_wo()
        wo = float(condition_number(m, method="svd"))
        wo_heads = tuple(float(v) for v in condition_number(output_heads(m, w.heads)))
    return LayerWeights(spec.index, spec.name, spec.heads, kappas, spec.qkv_source, wo, wo_heads, wo_note)


def _loaded_layer(spec: LayerSpec, model: nn.Module) -> LayerWeights:
    w = spec.weights()
    proj, note = find_output_projection(model, spec.attn_in.module, w)
    return _layer(spec, w, model, None if proj is None else proj.right_multiplying, note)


def _streamed_layer(spec: LayerSpec, streamed: StreamedModel) -> LayerWeights | str:
    """The layer's numbers, reading only its projections from the files; a string: why it has none."""
    attn = spec.attn_in.module
    meta_w = spec.weights()  # on the skeleton: shapes only
    proj, note = find_output_projection(streamed.model, attn, meta_w)
    needed = streamed.touched(spec.weights)
    if proj is not None:
        weight = proj.module.weight
        if id(weight) in streamed.names:
            needed.add(streamed.names[id(weight)][0])
    with streamed.materialized(needed) as missing:
        w = spec.weights()
        if on_meta(w.wq, w.wk, w.wv, w.bq, w.bk, w.bv):  # the reading touched more than was recorded
            with streamed.materialized(streamed.params_of(attn) - needed) as more:
                w = spec.weights()
                missing = [*missing, *more]
        if on_meta(w.wq, w.wk, w.wv):
            return f"{spec.name}: Q/K/V weights not in the weights files ({', '.join(missing[:3])})"
        wo_weight = None if proj is None else proj.module.weight
        read_wo = None
        if proj is not None and isinstance(wo_weight, torch.Tensor) and not on_meta(wo_weight):
            read_wo = proj.right_multiplying
        if proj is not None and read_wo is None:
            note = f"W_O not in the weights files ({proj.path})"
        return _layer(spec, w, streamed.model, read_wo, note)


def weights_report(
    src: WeightsSource, layers: list[int] | None = None, method: Method = "auto"
) -> WeightsReport:
    """Every weight-only number of ``src`` (``layers``: None all, else indices, negative from the end)."""
    from condcli.capture import layer_set

    chosen = set(layer_set(src.adapter, layers))
    notes = list(src.notes)
    table = _embedding_table(src, method)
    if table is None:
        notes.append("no token-embedding table: the model has no get_input_embeddings() (e.g. a ViT)")
    out: list[LayerWeights] = []
    for spec in src.adapter.layers:
        if spec.index not in chosen:
            continue
        if spec.refused is not None:
            notes.append(f"{spec.name}: no numbers ({spec.refused})")
            continue
        if src.streamed is not None:
            got = _streamed_layer(spec, src.streamed)
        else:
            got = _loaded_layer(spec, src.top)
        if isinstance(got, str):
            notes.append(got)
        else:
            out.append(got)
    if any(layer.qkv_source == "generic (unverified)" for layer in out):
        notes.append(UNPROVEN)
    absent = [layer.name for layer in out if layer.wo is None]
    if absent:
        why = next(layer.wo_note for layer in out if layer.wo is None)
        notes.append(f"κ(W_O) absent for {len(absent)} layer(s): {why}")
    return WeightsReport(src.info, src.streamed is not None, table, tuple(out), tuple(notes))


def analyse_weights(run: RunOptions, config: Path | None = None, method: Method = "auto") -> WeightsReport:
    """``condcli weights``: :func:`open_source` then :func:`weights_report` over ``run.layers``."""
    src = open_source(run, config)
    try:
        return weights_report(src, run.layer_choice(), method)
    finally:
        if src.streamed is not None:
            src.streamed.files.close()
