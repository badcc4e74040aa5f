"""GGUF files (llama.cpp, Ollama, LM Studio) as models: read by transformers, dequantized, with their own
tokenizer.

MODEL ``path/model.gguf`` is loaded through transformers' GGUF support (``from_pretrained(folder,
gguf_file=name)``, for the model and for the tokenizer the file carries) into a plain float model: every
quantized block is dequantized at load, so κ(W) is that of the dequantized weights, and the report says
which types they were dequantized from (:class:`Quantization`). Reading needs the ``gguf`` package (the
``gguf`` extra). Before transformers sees the file, condcli reads its header itself
(:mod:`condcli.loading.gguf_header`): a file whose counts or offsets lie, or an architecture transformers
cannot read from GGUF, is one error and exit 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from condcli.errors import InputError, UsageError
from condcli.inputs.batches import Preprocessing
from condcli.loading import hub
from condcli.loading.gguf_header import GgufHeader, read_header
from condcli.loading.hf import config_class
from condcli.loading.model_size import check_fits

EXTRA = "pip install 'condcli[gguf]'"
FLOATS = ("F32", "F16", "BF16", "F64")  # stored as values, not quantized blocks
DOMINANT = 0.1  # a type holding at least this share of the matrix weights is named
# how transformers' GGUF loader renames a llama.cpp architecture before it looks it up
RENAMED = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2"}
NOT_ARCHITECTURES = ("general", "tokenizer")  # keys of transformers' mapping that name no architecture


def gguf_package() -> Any:
    """The ``gguf`` package, or one UsageError naming the extra that installs it."""
    try:
        import gguf
    except ImportError:
        raise UsageError(
            "reading a GGUF file needs the gguf package, which is not installed", EXTRA
        ) from None
    from transformers.utils.import_utils import is_gguf_available

    if not is_gguf_available():
        version = getattr(gguf, "__version__", "an old version")
        raise UsageError(f"transformers cannot read GGUF files with gguf {version}", EXTRA)
    return gguf


def readable_architectures() -> list[str]:
    """The GGUF architectures (``general.architecture``) this transformers reads."""
    found: set[str] = set()
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

        found |= set(GGUF_SUPPORTED_ARCHITECTURES) - set(NOT_ARCHITECTURES)
    except ImportError:
        pass
    try:
        from transformers.integrations.gguf import GGUF_ARCHS

        found |= set(GGUF_ARCHS)
    except ImportError:
        pass
    return sorted(found)


def _readable(architecture: str, known: list[str]) -> bool:
    if architecture in known or RENAMED.get(architecture) in known:
        return True
    return "t5" in architecture and "t5" in known  # t5encoder and umt5 are read as t5


def read(path: Path) -> GgufHeader:
    """The checked header of ``path`` (:mod:`condcli.loading.gguf_header`), of an architecture transformers
    reads from GGUF."""
    gguf = gguf_package()
    sizes = {int(kind): (int(block), int(size)) for kind, (block, size) in gguf.GGML_QUANT_SIZES.items()}
    header = read_header(path, sizes)
    known = readable_architectures()
    if not _readable(header.architecture, known):
        raise InputError(
            f"{path} holds a {header.architecture!r} model, an architecture transformers cannot read from"
            f" GGUF (it reads {', '.join(known)})",
            "give the model as a transformers folder or hub id, or convert it to one of those",
        )
    return header


@dataclass(frozen=True)
class Quantization:
    """How a GGUF file stored the weights condcli analyses dequantized."""

    file: str
    types: dict[str, float]  # ggml type → share of the matrix weights' elements (ndim ≥ 2), largest first
    file_type: str | None  # llama.cpp's name for the whole file's mix (general.file_type), e.g. Q4_K_M

    @property
    def quantized(self) -> bool:
        return any(t not in FLOATS for t in self.types)

    @property
    def dominant(self) -> list[str]:
        """The types that hold at least 10 % of the matrix weights (at least the largest)."""
        names = list(self.types)
        return [t for t in names if self.types[t] >= DOMINANT] or names[:1]

    def describe(self) -> str:
        """One line for the report: 'weights dequantized from Q4_K (78% of the matrix weights) and Q6_K
        (22%) (GGUF, llama.cpp file type Q4_K_M): …'."""
        main = self.dominant
        rest = len(self.types) - len(main)
        parts = [main[0]] if len(self.types) == 1 else [f"{t} ({self.types[t]:.0%})" for t in main]
        if len(self.types) > 1:
            parts[0] = parts[0][:-1] + " of the matrix weights)"
        if rest:
            parts.append(f"{rest} other type{'s' * (rest != 1)}")
        what = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        source = "GGUF" + (f", llama.cpp file type {self.file_type}" if self.file_type else "")
        if not self.quantized:
            return f"weights read from {what} ({source}; not quantized)"
        return f"weights dequantized from {what} ({source}): κ(W) is that of the dequantized weights"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "gguf",
            "file": self.file,
            "quantized": self.quantized,
            "types": dict(self.types),
            "dominant": self.dominant,
            "file_type": self.file_type,
            "description": self.describe(),
        }


def quantization(header: GgufHeader) -> Quantization:
    """The ggml types of the file's matrices (the vectors, norms and biases, are F32 in every file)."""
    gguf = gguf_package()
    counts: dict[str, int] = {}
    matrices = [t for t in header.tensors if len(t.dims) >= 2] or list(header.tensors)
    for t in matrices:
        name = gguf.GGMLQuantizationType(t.ggml_type).name
        counts[name] = counts.get(name, 0) + t.elements
    total = sum(counts.values()) or 1
    types = {k: v / total for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}
    code = header.metadata.get("general.file_type")
    file_type = None
    if isinstance(code, int) and code in {int(v) for v in gguf.LlamaFileType}:
        kind = gguf.LlamaFileType(code)
        file_type = None if kind == gguf.LlamaFileType.GUESSED else kind.name.removeprefix("MOSTLY_")
    return Quantization(str(header.path), types, file_type)


@contextmanager
def _no_bar() -> Iterator[None]:
    """transformers' GGUF loader draws a tqdm bar on stderr of its own (not behind its progress switch)."""
    try:
        from transformers import modeling_gguf_pytorch_utils as legacy
    except ImportError:
        yield
        return
    saved = getattr(legacy, "tqdm", None)
    legacy.tqdm = lambda items, *args, **kwargs: items
    try:
        yield
    finally:
        legacy.tqdm = saved


def config(path: Path, trust: bool) -> Any:
    """The transformers config transformers makes of the file's metadata."""
    from transformers import AutoConfig

    with hub.loading(f"the metadata of {path}", False), _no_bar():
        return AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name, trust_remote_code=trust)


def model_class(cfg: Any) -> Any:
    """The class a GGUF file loads as: its config's ``architectures`` (a T5 encoder), else the causal LM of
    its ``model_type`` (the task head of an LLM file; condcli analyses the base model under it), else the
    bare model."""
    from transformers import AutoModel, AutoModelForCausalLM

    named = config_class(cfg)
    if named is not None:
        return named
    for auto in (AutoModelForCausalLM, AutoModel):
        try:
            return auto._model_mapping[type(cfg)]
        except KeyError:
            continue
    raise InputError(
        f"transformers has no model class for the {type(cfg).__name__} its GGUF metadata describes",
        "give the model as a transformers folder or hub id",
    )


def check_size(path: Path, cfg: Any, device: torch.device, dtype: torch.dtype | None) -> None:
    """The dequantized model the metadata describes fits in memory (built on the meta device first)."""
    cls = model_class(cfg)
    check_fits(lambda c: cls._from_config(c), cfg, cfg.to_dict(), str(path), device, dtype)


def _dequantized() -> dict[str, Any]:
    """``from_pretrained`` keywords that unpack every block at load, where this transformers could keep
    some packed (a plain model is what the adapters read W from)."""
    try:
        from transformers.utils.quantization_config import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def model(path: Path, cfg: Any, pretrained: bool) -> tuple[nn.Module, str]:
    """The model of ``path``: its weights dequantized (``pretrained``), or random ones of its shapes."""
    cls = model_class(cfg)
    if not pretrained:
        return cls._from_config(cfg), f"built as {cls.__name__} from the metadata of {path} (random weights)"
    with hub.loading(str(path), False), _no_bar():
        built, info = cls.from_pretrained(
            str(path.parent), gguf_file=path.name, config=cfg, output_loading_info=True, **_dequantized()
        )
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise InputError(
            f"{path} holds no tensor for {missing[0]}{more} of {cls.__name__}, which would stay random",
            "convert the model again (llama.cpp's convert_hf_to_gguf.py)",
        )
    return built, f"loaded as {cls.__name__} from {path} through transformers' GGUF support"


def preprocessing(header: GgufHeader, base: Preprocessing, trust: bool) -> Preprocessing:
    """``base`` (what the model reads, from its config) with the tokenizer the file carries; a file that
    carries none keeps random token ids, and a tokenizer transformers cannot build is one error."""
    from transformers import AutoTokenizer

    path = header.path
    kind = header.metadata.get("tokenizer.ggml.model")
    if base.modality != "text":
        return base
    if not isinstance(kind, str):
        return replace(base, describe=f"{path} carries no tokenizer: random token ids")
    try:  # quiet already: the config was read through hub.loading
        with _no_bar():
            tokenizer = AutoTokenizer.from_pretrained(
                str(path.parent), gguf_file=path.name, trust_remote_code=trust
            )
            tokenizer("A test sentence.")
    except MemoryError:
        raise
    except Exception as e:  # transformers and tokenizers raise many types on a vocabulary they cannot use
        why = " ".join(str(e).split())[:200] or type(e).__name__
        raise InputError(
            f"the {kind!r} tokenizer of {path} cannot be built: {why}",
            "re-convert the file with llama.cpp's convert_hf_to_gguf.py",
        ) from None
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:  # padding is masked out of X anyway
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    most = tokenizer.model_max_length
    limit = base.max_length if not isinstance(most, int) or most < 1 else min(most, base.max_length)
    return replace(
        base,
        describe=f"{type(tokenizer).__name__} ({kind}) from {path} (max {limit} tokens, right padding)",
        tokenizer=tokenizer,
        max_length=limit,
        vocab_size=base.vocab_size or len(tokenizer),
    )
