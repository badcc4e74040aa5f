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

import ast
import inspect
import textwrap
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
    notes: list[str] = []
    part = _part_that_runs(model)
    if part is not None:  # the model given has no forward (Bark), or one that never runs part of it (Janus)
        name, module, why = part
        inner, more = analysed_module(module)
        return inner, [f"analysed: its part {name} ({type(module).__name__}): {why}", *more]
    base = getattr(model, "base_model", model)
    if not isinstance(base, nn.Module) or not _takes_inputs(base, model):
        base = model  # an inner module with another signature (hidden_states): run the model given (issue 42)
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


def _part_that_runs(model: nn.Module) -> tuple[str, nn.Module, str] | None:
    """(name, part, why) where condcli runs a part of ``model`` rather than the model (issue 42), else None:

    - a model with no forward of its own (``nn.Module``'s, which raises: Bark, whose parts semantic,
      coarse_acoustics, … each have theirs): the first of its parts whose forward reads the model's main input
      and requires nothing else;
    - a model whose forward never reaches a part that holds attention (Janus's VQ-VAE decoder runs only when
      it generates images, from other methods): the one part its forward does reach that holds attention and
      reads the model's main input (Janus's language model on input_ids), so that no attention it never runs
      is analysed.
    """
    base = getattr(model, "base_model", model)
    whole = base if isinstance(base, nn.Module) else model
    main = getattr(whole, "main_input_name", None)
    if not isinstance(main, str):
        return None
    children = dict(whole.named_children())
    if type(whole).forward is nn.Module.forward:
        takers = [n for n, c in children.items() if _own_forward(c) and _reads_only(c, main)]
        if not takers:
            return None
        with_forward = [n for n, c in children.items() if _own_forward(c)]
        why = (
            f"{type(whole).__name__} has no forward of its own; its parts {', '.join(with_forward)} have one,"
            f" and {takers[0]} is the first that reads {main}"
        )
        return takers[0], children[takers[0]], why
    reached = _reached(type(whole))
    if reached is None:
        return None
    holding = {n for n, c in children.items() if _holds_attention(c)}
    never = sorted(holding - reached)
    runs = [n for n in children if n in holding & reached and _reads(children[n], main)]
    if not never or len(runs) != 1:
        return None
    why = (
        f"{type(whole).__name__}'s forward never runs its {', '.join(never)} (its source, and that of the"
        f" methods it calls, never names it); {runs[0]} is the part it runs that holds attention and reads"
        f" {main}"
    )
    return runs[0], children[runs[0]], why


def _own_forward(module: nn.Module) -> bool:
    return type(module).forward is not nn.Module.forward


def _params(module: nn.Module) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return {}


def _reads(module: nn.Module, main: str) -> bool:
    """Whether ``module.forward`` takes ``main`` by name."""
    return main in _params(module)


def _reads_only(module: nn.Module, main: str) -> bool:
    """Whether ``module.forward`` takes ``main`` by name and requires no other argument (Bark's fine acoustics
    model requires a codebook index)."""
    params = _params(module)
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    required = [n for n, p in params.items() if p.kind in named and p.default is inspect.Parameter.empty]
    return main in params and set(required) <= {main}


def _holds_attention(module: nn.Module) -> bool:
    """Whether ``module`` holds an attention: nn.MultiheadAttention, or a class so named (Janus's VQ-VAE has
    ``JanusVQVAEAttnBlock``)."""
    return any(
        isinstance(m, nn.MultiheadAttention) or "Attention" in type(m).__name__ or "Attn" in type(m).__name__
        for m in module.modules()
    )


def _reached(cls: type) -> set[str] | None:
    """The attributes of ``self`` that ``cls.forward`` names, and those its methods and properties name that
    a model's own code defines (not the library's base classes, nor torch's), read from their source; None
    where that cannot be told: a source that cannot be read, ``self`` passed on or read by name
    (``getattr(self, …)``), ``super()``."""
    seen: set[str] = set()
    names: set[str] = set()
    todo = ["forward"]
    while todo:
        method = todo.pop()
        if method in seen:
            continue
        seen.add(method)
        member = inspect.getattr_static(cls, method)
        member = member.fget if isinstance(member, property) else getattr(cls, method)
        if not callable(member):
            return None
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(member))))
        except (OSError, TypeError, SyntaxError, ValueError):
            return None
        fn = tree.body[0] if tree.body else None
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or not fn.args.args:
            return None
        me = fn.args.args[0].arg
        nodes = list(ast.walk(fn))
        held = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        for node in nodes:
            if isinstance(node, ast.Name) and node.id in (me, "super") and id(node) not in held:
                return None  # ``self`` passed on (getattr(self, name), a helper given self), or super()
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
                names.add(node.attr)
                if _models_own(node.attr, cls):
                    todo.append(node.attr)
    return names


def _models_own(name: str, cls: type) -> bool:
    """Whether ``cls.name`` is a method or property that a model's own code defines (``cls``'s module, or a
    model of the library: transformers.models.*), not a base class's of the library or torch's."""
    try:
        member = inspect.getattr_static(cls, name)
    except AttributeError:
        return False
    member = member.fget if isinstance(member, property) else getattr(cls, name)
    fn = inspect.unwrap(member) if callable(member) else None
    module = getattr(fn, "__module__", "") if inspect.isfunction(fn) else ""
    return bool(module) and (module == cls.__module__ or module.startswith("transformers.models."))


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
