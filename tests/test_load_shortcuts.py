"""Shortcuts that spare a whole process seconds of imports and passes (issue 43, whole-process timing): each
gives exactly the answer of what it stands in for, and does not import what it spares."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import timm
import torch
from torch import nn

from condcli.adapters import hf_bert
from condcli.adapters.hf_common import base_model, hf_class, is_hf_instance
from condcli.loading.names import in_timm_source, is_timm_name, timm_source_names
from condcli.loading.samples import sample_names
from condcli.loading.weights_files import CHUNK, _non_finite

FAMILY_CLASSES = [
    *[(module, name) for name, (module, _) in hf_bert._FAMILIES.items()],
    ("gpt2.modeling_gpt2", "GPT2Model"),
    ("vit.modeling_vit", "ViTModel"),
    ("nystromformer.modeling_nystromformer", "NystromformerModel"),
]


def test_timm_name_agrees_with_timm_without_importing_it_for_a_path(tmp_path: Path) -> None:
    names = timm.list_models()
    candidates = [
        *names[::7],
        *[f"{n}.some_tag" for n in names[::50]],
        *[f"{n}.fb/x" for n in names[:5]],  # a tag with a slash: timm still says yes
        *[f"a/{n}" for n in names[:5]],
        *[f"./{n}" for n in names[:5]],
        *sample_names(),
        "",
        ".",
        "vit-plain",
        "resnet50x",
        "deit_tiny_patch16_224",
        str(tmp_path),
        "C:\\models\\vit",
        "hf-hub:timm/vit_tiny_patch16_224",
    ]
    for name in candidates:
        assert is_timm_name(name) == timm.is_model(name), name
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    # by its path, and by its bare name as a user types it in its parent (a name timm could register:
    # whether it does is read from timm's source, not asked of an imported timm)
    for typed, cwd in ((str(folder), None), ("model", tmp_path)):
        code = (
            "import sys\nfrom condcli.loading.names import parse_spec\n"
            f"spec = parse_spec({typed!r})\nassert spec.kind == 'local' and spec.note is None, spec\n"
            "assert 'timm' not in sys.modules, 'a local folder imported timm'\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=cwd)


def test_timm_source_names_hold_every_name_timm_registers() -> None:
    from timm.models._registry import _model_entrypoints

    registered = set(_model_entrypoints)  # functions and deprecated names alike
    assert registered <= timm_source_names()
    assert len(registered) > 1000
    for name in [*list(registered)[::97], "vit_base_patch16_224.augreg_in21k", "model", "checkpoint", "out"]:
        assert in_timm_source(name) or not timm.is_model(name), name  # never a false no
    for word in ("model", "checkpoint", "out", "smollm", "my_model"):  # folder names: no timm import for them
        assert not in_timm_source(word) and not timm.is_model(word)


def _models() -> list[nn.Module]:
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaModel

    small = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    return [
        BertModel(BertConfig(**small)),
        GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2)),  # a task head over the base
        LlamaModel(LlamaConfig(**small, vocab_size=100)),
        nn.Linear(2, 2),
    ]


@pytest.mark.parametrize("model", _models(), ids=lambda m: type(m).__name__)
def test_hf_instance_agrees_with_isinstance(model: nn.Module) -> None:
    for module, name in FAMILY_CLASSES:
        cls = hf_class(module, name)
        want = cls is not None and isinstance(base_model(model), cls)
        assert is_hf_instance(model, module, name) == want, (type(model).__name__, name)


def test_llama_matching_imports_no_family_module() -> None:
    code = (
        "import sys\nfrom transformers import LlamaConfig, LlamaModel\n"
        "from condcli.adapters import adapter_for\n"
        "m = LlamaModel(LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, "
        "intermediate_size=64, vocab_size=100))\nadapter_for(m)\n"
        "spared = ['transformers.models.bert.modeling_bert', 'transformers.models.gpt2.modeling_gpt2', "
        "'transformers.models.vit.modeling_vit', 'timm']\n"
        "loaded = [s for s in spared if s in sys.modules]\nassert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _counted(t: torch.Tensor) -> int:
    """The chunked count itself, as a reference."""
    flat = t.reshape(-1)
    return sum(int((~torch.isfinite(flat[i : i + CHUNK])).sum()) for i in range(0, flat.numel(), CHUNK))


@pytest.mark.parametrize(
    "t",
    [
        torch.randn(100),
        torch.tensor([1.0, float("nan"), 2.0]),
        torch.tensor([float("inf"), -float("inf"), 1.0]),
        torch.tensor([3e38, 3e38, -1.0]),  # finite entries whose sum overflows
        torch.full((100,), 60000.0, dtype=torch.float16),  # fp16: the sum overflows
        torch.tensor([1.0, float("nan")], dtype=torch.bfloat16),
        torch.zeros(0),
        torch.tensor([1 + 1j, complex("nan+0j")], dtype=torch.complex64),
    ],
)
def test_non_finite_count_agrees_with_the_chunked_count(t: torch.Tensor) -> None:
    assert _non_finite(t) == _counted(t)
