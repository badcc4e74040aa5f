"""The model's own preprocessing: timm's data config + transforms, or the HF tokenizer or image processor
(audio and video: :mod:`condcli.inputs.preprocessing_av`; which one a model gets:
:mod:`condcli.inputs.model_inputs`).

Never hand-written resizing or normalisation: when a model ships no preprocessing config, the family's
library defaults are used and the description says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from condcli.adapters.nested_config import setting
from condcli.errors import InputError
from condcli.inputs.batches import Preprocessing

TEXT_FEEDS = ("input_ids", "attention_mask")  # what a text batch carries (condcli.inputs.batches)
HUGE = 1_000_000  # tokenizers without a real limit report model_max_length ≈ 1e30


def timm_preprocessing(model: nn.Module) -> Preprocessing:
    """Eval transforms from the model's pretrained_cfg (timm.data.resolve_data_config + create_transform)."""
    from timm.data import create_transform, resolve_data_config

    cfg = resolve_data_config(model=model)
    built = getattr(getattr(model, "patch_embed", None), "img_size", None)  # the size the model was built for
    resized = ""
    if isinstance(built, tuple | list) and len(built) == 2 and tuple(cfg["input_size"][1:]) != tuple(built):
        resized = f" (built for {built[0]}×{built[1]}; its pretrained config says {cfg['input_size'][1]}×…)"
        cfg = resolve_data_config({"input_size": (3, int(built[0]), int(built[1]))}, model=model)
    transform = create_transform(**cfg)
    _, h, w = cfg["input_size"]
    mean = ", ".join(f"{v:.3g}" for v in cfg["mean"])
    std = ", ".join(f"{v:.3g}" for v in cfg["std"])
    describe = (
        f"timm data config: input {h}×{w}{resized}, {cfg['interpolation']} interpolation, "
        f"crop_pct {cfg['crop_pct']}, "
        f"mean ({mean}), std ({std})"
    )
    return Preprocessing("images", describe, image_transform=transform, image_size=(h, w))


PREPROCESSOR = "preprocessor_config.json"


def _load_local(
    load: Callable[[], Any], folder: Path, what: str, defaults: str, file: str = PREPROCESSOR
) -> Any:
    """``load()`` of the preprocessor (``what``) whose ``file`` (preprocessor_config.json) is in ``folder``:
    that file not being JSON, or any failure to load it, is one InputError naming it (never taken for no
    file)."""
    from condcli.parsing import read_json

    hint = f"replace {file} with the model's own, or remove it to use {defaults}"
    try:
        read_json(folder / file, file, hint)
        return load()
    except InputError as e:
        raise InputError(f"the {what} in {folder} cannot be loaded ({e.message})", hint) from None
    except MemoryError:
        raise
    except Exception as e:  # transformers raises many types on a broken config
        if "trust_remote_code" in str(e):
            raise InputError(
                f"the {what} in {folder} runs code from the folder",
                "pass `trust_remote_code` if you trust that code",
            ) from None
        why = f"{file}: {type(e).__name__}: {_first_line(e)}"
        raise InputError(f"the {what} in {folder} cannot be loaded ({why})", hint) from None


def _image_processor(source: str | Path | None, config: Any, trust: bool) -> tuple[Any, str]:
    from PIL import Image
    from transformers import AutoImageProcessor, ViTImageProcessor

    if source is not None and Path(source).is_dir() and (Path(source) / PREPROCESSOR).is_file():
        folder = Path(source)
        defaults = "the library's ViTImageProcessor defaults"
        proc = _load_local(
            lambda: AutoImageProcessor.from_pretrained(str(source), trust_remote_code=trust),
            folder,
            "image processor",
            defaults,
        )
        try:
            proc(Image.new("RGB", (64, 48)), return_tensors="pt")["pixel_values"]
        except MemoryError:
            raise
        except Exception as e:  # e.g. a negative size
            raise InputError(
                f"the image processor in {folder} ({PREPROCESSOR}) loads but cannot preprocess an image"
                f" ({_first_line(e)})",
                f"replace {PREPROCESSOR} with the model's own, or remove it to use {defaults}",
            ) from None
        return proc, f"{type(proc).__name__} from {source}"
    if source is not None:
        try:
            proc = AutoImageProcessor.from_pretrained(str(source), trust_remote_code=trust)
            return proc, f"{type(proc).__name__} from {source}"
        except (OSError, ValueError, KeyError):
            pass
    h, w = image_size(config)
    proc = ViTImageProcessor(size={"height": h, "width": w})
    return proc, f"ViTImageProcessor defaults at {h}×{w} (the model has no preprocessor config)"


def image_size(config: Any, default: int = 224, name: str = "image_size") -> tuple[int, int]:
    """(height, width) from a config's ``image_size`` (or that of its ``vision_config``): an integer, a
    [height, width] list or tuple, or a {"height", "width"} mapping; anything else is one InputError naming
    it."""
    value = setting(config, name, ("vision_config",), default)
    if isinstance(value, dict):
        value = (value.get("height"), value.get("width"))
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if (
        isinstance(value, tuple | list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        return int(value[0]), int(value[1])
    raise InputError(
        f"the model's config gives {name} as {value!r}, not an image size",
        f"fix {name} in its config.json: an integer, or [height, width]",
    )


def keep_read(made: Any, reads: frozenset[str] | None) -> tuple[dict[str, torch.Tensor], list[str]]:
    """(the tensors of a processor's output that the model's forward reads, the names of those it does not
    read); ``reads`` None: every tensor."""
    kept: dict[str, torch.Tensor] = {}
    dropped: list[str] = []
    for key, value in dict(made).items():
        if not isinstance(value, torch.Tensor):
            continue
        if reads is None or key in reads:
            kept[key] = value
        else:
            dropped.append(key)
    return kept, dropped


def fed(kept: dict[str, torch.Tensor], dropped: list[str]) -> str:
    """``"; feeds pixel_values, pixel_mask"`` (and what the forward does not read), for a description."""
    text = f"; feeds {', '.join(kept)}"
    return text + (f" (not read by the model, so not fed: {', '.join(dropped)})" if dropped else "")


def hf_image_preprocessing(
    source: str | Path | None, config: Any, trust: bool = False, reads: frozenset[str] | None = None
) -> Preprocessing:
    """The model's image processor, every tensor it makes for a batch of images that the model's forward
    reads (``reads``: its parameter names; None: all), not only ``pixel_values``."""
    from PIL import Image

    proc, describe = _image_processor(source, config, trust)
    size = image_size(config)

    def batch(images: list[Any]) -> dict[str, torch.Tensor]:
        return keep_read(proc(images, return_tensors="pt"), reads)[0]

    def transform(image: Any) -> torch.Tensor:
        pixels: torch.Tensor = proc(image, return_tensors="pt")["pixel_values"][0]
        return pixels

    kept, dropped = keep_read(proc([Image.new("RGB", (64, 48))], return_tensors="pt"), reads)
    if list(kept) != ["pixel_values"] or dropped:
        describe += fed(kept, dropped)
    return Preprocessing(
        "images",
        describe,
        image_transform=transform,
        image_size=size,
        image_batch=batch if list(kept) != ["pixel_values"] else None,
        feeds=tuple(kept),
    )


def _max_positions(config: Any) -> int:
    for name in ("max_position_embeddings", "n_positions", "max_seq_len"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"}:
                return value - 2  # positions start after the padding index
            return value
    return 512


TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)
JSON_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json")
TEXT_FILES = ("vocab.txt", "merges.txt")


def _has_tokenizer_files(source: str | Path) -> bool:
    """A local folder must hold tokenizer files (transformers would otherwise build an empty tokenizer)."""
    folder = Path(source)
    if not folder.is_dir():
        return True  # a hub id: the hub decides
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def _first_line(e: BaseException, most: int = 200) -> str:
    """The first line of an exception's message, at most ``most`` characters."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text if len(text) <= most else text[: most - 1] + "…"


def _broken_file(folder: Path) -> str | None:
    """Which tokenizer file of ``folder`` cannot be read, and why (``"tokenizer.json: invalid JSON …"``)."""
    from tokenizers import Tokenizer

    from condcli.parsing import read_json

    for name in (*JSON_FILES, "tokenizer.json"):
        if (folder / name).is_file():
            try:
                read_json(folder / name, name, "")
            except InputError as e:
                return e.message
    if (folder / "tokenizer.json").is_file():
        try:
            Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as e:  # the Rust library raises a bare Exception
            return f"tokenizer.json is not a tokenizer: {_first_line(e)}"
    for name in TEXT_FILES:
        if (folder / name).is_file():
            try:
                (folder / name).read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                return f"{name}: it is not UTF-8 text"
    return None


def _tokenizer(source: str | Path, trust: bool) -> Any:
    """The tokenizer of ``source``, or None where it has none. Tokenizer files in a local folder that cannot
    be loaded, or that cannot encode a sentence, are one InputError naming the folder and, where it can be
    told, the file: they are never mistaken for no tokenizer."""
    from transformers import AutoTokenizer

    folder = Path(source)
    if not folder.is_dir():
        try:
            return AutoTokenizer.from_pretrained(str(source), trust_remote_code=trust)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a hub id without a tokenizer, or the hub out of reach
    if not _has_tokenizer_files(folder):
        return None
    names = (*TOKENIZER_FILES, *JSON_FILES[1:], "merges.txt")
    present = ", ".join(n for n in names if (folder / n).is_file())
    hint = "replace them with the model's own tokenizer files, or remove them to analyse random token ids"
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source), trust_remote_code=trust)
    except MemoryError:
        raise
    except Exception as e:  # transformers and tokenizers raise many types on a broken file
        if "trust_remote_code" in str(e) and not trust:
            raise InputError(
                f"the tokenizer in {folder} runs code from the folder",
                "pass `trust_remote_code` if you trust that code",
            ) from None
        why = _broken_file(folder) or f"{present}: {type(e).__name__}: {_first_line(e)}"
        raise InputError(f"the tokenizer files in {folder} cannot be loaded ({why})", hint) from None
    try:
        tokenizer("A test sentence.")
    except MemoryError:
        raise
    except Exception as e:  # e.g. a WordPiece vocabulary without its unknown token
        raise InputError(
            f"the tokenizer files in {folder} ({present}) load but cannot encode text ({_first_line(e)})",
            hint,
        ) from None
    return tokenizer


def hf_text_preprocessing(source: str | Path | None, config: Any, trust: bool = False) -> Preprocessing:
    """The model's tokenizer (right padding, so that the attention mask marks the tail) or none."""
    limit = _max_positions(config)
    pad_to = getattr(config, "segment_means_seq_len", None) if config.model_type == "nystromformer" else None
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    tokenizer = _tokenizer(source, trust) if source is not None else None
    if tokenizer is None:
        return Preprocessing(
            "text",
            "no tokenizer found: random token ids",
            max_length=limit,
            pad_to=pad_to,
            vocab_size=vocab,
            feeds=TEXT_FEEDS,
        )
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:  # GPT-2 style: padding is masked out of X anyway
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    max_len = _token_limit(tokenizer.model_max_length, limit, source)
    describe = f"{type(tokenizer).__name__} from {source} (max {min(max_len, limit)} tokens, right padding)"
    return Preprocessing(
        "text",
        describe,
        tokenizer=tokenizer,
        max_length=min(max_len, limit),
        pad_to=pad_to,
        vocab_size=vocab or len(tokenizer),
        feeds=TEXT_FEEDS,
    )


def _token_limit(value: Any, limit: int, source: str | Path | None) -> int:
    """The tokenizer's maximum length (``model_max_length``); a huge one means none, so ``limit`` applies."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
        raise InputError(
            f"the tokenizer of {source} gives its maximum length as {value!r}, not a positive number",
            f"fix model_max_length in its tokenizer_config.json, or remove it (the model's {limit} positions"
            " then apply)",
        )
    return int(value) if value < HUGE else limit
