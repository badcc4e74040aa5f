"""A Hugging Face model as its config says it is, and the module of it that condcli analyses.

The class is ``architectures[0]`` of config.json where transformers has it (a folder saved from
LlamaForCausalLM loads as LlamaForCausalLM, one saved from T5EncoderModel as T5EncoderModel), else AutoModel.
Remote code runs only when ``trust_remote_code`` is given.

What is analysed is the bare transformer under any task head (``model.base_model``): X, X_l and P live
there, and its forward computes no logits over the vocabulary. An encoder-decoder model (T5, BART,
Whisper) is analysed on its encoder alone (``get_encoder()``), which needs no decoder inputs. Its
``use_cache`` is switched off: a decoder LLM's forward then builds no key/value cache it would never reuse.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn


def config_class(config: Any) -> type[nn.Module] | None:
    """The transformers class named first in the config's ``architectures``, or None where it has none."""
    import transformers

    names = getattr(config, "architectures", None) or []
    name = names[0] if names and isinstance(names[0], str) else None
    if name is None:
        return None
    try:
        cls = getattr(transformers, name, None)
    except (ImportError, RuntimeError):  # a lazily imported class whose dependencies are missing
        return None
    pretrained = getattr(transformers, "PreTrainedModel", None)
    if not isinstance(cls, type) or pretrained is None or not issubclass(cls, pretrained):
        return None
    return cls


def hf_model(target: str, config: Any, pretrained: bool, trust: bool, **placed: Any) -> tuple[nn.Module, str]:
    """The model of ``target`` (a folder or hub id) with ``config``, and a note naming the class loaded.

    ``placed``: ``device_map``/``offload_folder``/``dtype`` for ``from_pretrained``, which then reads the
    weights straight onto their devices (only a config class's pretrained weights, see :func:`streams`)."""
    from transformers import AutoModel

    cls: Any = config_class(config)
    model: nn.Module
    if cls is not None:
        if pretrained:
            model = cls.from_pretrained(target, config=config, **placed)
        else:
            model = cls._from_config(config)
        return model, f"loaded as {cls.__name__} (config.json architectures)"
    if pretrained:
        model = AutoModel.from_pretrained(target, config=config, trust_remote_code=trust)
    else:
        model = AutoModel.from_config(config, trust_remote_code=trust)
    named = getattr(config, "architectures", None) or []
    why = f"{named[0]} is not a transformers class" if named else "config.json names no architecture"
    return model, f"loaded as {type(model).__name__} (AutoModel: {why})"


def streams(config: Any) -> Any:
    """The config class if its pretrained weights can be read straight onto a device map (it names the
    blocks never to split, ``_no_split_modules``), else None."""
    cls: Any = config_class(config)
    return cls if cls is not None and getattr(cls, "_no_split_modules", None) else None


def analysed_module(model: nn.Module) -> tuple[nn.Module, list[str]]:
    """The part of ``model`` condcli analyses (base model; the encoder of an encoder-decoder), with notes."""
    base = getattr(model, "base_model", model)
    if not isinstance(base, nn.Module) or not _takes_inputs(base, model):
        base = model  # an inner module with another signature (hidden_states): run the model given (issue 42)
    notes: list[str] = []
    if base is not model and _attention_outside(model, base):
        # the base model the prefix names is only a part that the forward runs (WavTokenizer's encoder, its
        # attention in the decoder): the model given runs, as a task head never holds attention
        notes.append(
            f"analysed: the whole {type(model).__name__} (its base model {type(base).__name__} holds only"
            " part of its attention)"
        )
        base = model
    if base is not model:
        notes.append(
            f"analysed: its base model {type(base).__name__}"
            " (the task head's output is not needed for X, X_l, P)"
        )
    config: Any = getattr(base, "config", None)
    if config is not None and isinstance(getattr(config, "use_cache", None), bool):
        config.use_cache = False
    notes += _default_language(model, config)
    encoder, decoder = getattr(base, "encoder", None), getattr(base, "decoder", None)
    if isinstance(encoder, nn.Module) and isinstance(
        decoder, nn.Module
    ):  # encoder-decoder: T5, BART, Whisper
        get_encoder = getattr(base, "get_encoder", None)
        found = get_encoder() if callable(get_encoder) else encoder
        encoder = found if isinstance(found, nn.Module) and found is not base else encoder
        if not _takes_inputs(encoder, base):  # Funnel's encoder reads embeddings: the base model runs
            return base, notes
        if getattr(encoder, "config", None) is None:  # FSMT's encoder: no config to say what it reads
            return base, notes
        notes.append(
            f"analysed: the encoder {type(encoder).__name__} alone"
            " (encoder-decoder model; the decoder is not run)"
        )
        return encoder, notes
    return base, notes


def _default_language(model: nn.Module, config: Any) -> list[str]:
    """X-MOD runs a language's adapter in every layer, chosen by ``lang_ids`` or ``config.default_language``;
    a config that names none gets the first of its ``languages``, said in a note (none where it names one)."""
    languages = getattr(config, "languages", None)
    choose = getattr(model, "set_default_language", None)
    if getattr(config, "default_language", "") is not None or not languages or not callable(choose):
        return []
    language = str(next(iter(languages)))
    choose(language)
    more = f" of {len(languages)}" if len(languages) > 1 else ""
    return [
        f"language adapter: {language} (the first{more} in config.languages; the config names no"
        " default_language: set it in config.json to analyse another)"
    ]


def _attention_outside(model: nn.Module, part: nn.Module) -> bool:
    """Whether ``model`` holds an attention module (a class named so, or nn.MultiheadAttention) outside
    ``part``."""
    inside = {id(m) for m in part.modules()}
    return any(
        id(m) not in inside
        and (isinstance(m, nn.MultiheadAttention) or type(m).__name__.endswith(("Attention", "Attn")))
        for m in model.modules()
    )


def _takes_inputs(part: nn.Module, model: nn.Module) -> bool:
    """Whether ``part.forward`` takes ``model``'s main input (input_ids, pixel_values, …) by name, or any
    keyword where it names none of :data:`EMBEDDED_INPUTS` and requires no argument of its own: an inner
    module that reads ``hidden_states`` or ``inputs_embeds`` instead, or requires what the model computes
    (features, shapes), cannot be run alone (``**kwargs`` beside them would get nothing)."""
    if part is model:
        return True
    main = getattr(model, "main_input_name", None)
    try:
        params = inspect.signature(part.forward).parameters
    except (TypeError, ValueError):
        return True
    if not isinstance(main, str) or main in params:
        return True
    required = [
        name
        for name, p in params.items()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    if required:  # Grounding DINO's encoder: vision_features, spatial_shapes, … (what its model computes)
        return False
    if any(name in params for name in EMBEDDED_INPUTS):  # DETR's encoder: inputs_embeds, and **kwargs
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


# what an inner module reads in place of the model's main input: it runs on the model's embeddings
EMBEDDED_INPUTS = ("inputs_embeds", "hidden_states", "embeddings", "embedding_output", "features")
