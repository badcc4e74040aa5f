"""Model sources: every kind of MODEL loads, and every bad source is one clear error (exit 2), offline."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import timm
import torch
from safetensors.torch import save_file

from condcli.errors import InputError, UsageError
from condcli.loading.sources import LoadOptions, load, parse_spec

TINY_TIMM = "vit_tiny_patch16_224"
RANDOM = LoadOptions(weights="random", seed=3)


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_parse_spec_kinds(tmp_path: Path) -> None:
    assert parse_spec("vit_base_patch16_224").kind == "timm"
    assert parse_spec("vit_base_patch16_224.augreg_in21k").kind == "timm"
    assert parse_spec("timm:deit_small_patch16_224").target == "deit_small_patch16_224"
    assert (parse_spec("hf:bert-base-uncased").kind, parse_spec("hf:bert-base-uncased").target) == (
        "hf",
        "bert-base-uncased",
    )
    assert parse_spec("google/vit-base-patch16-224").kind == "hf"
    (tmp_path / "config.json").write_text("{}")
    assert parse_spec(str(tmp_path)).kind == "local"


def test_unknown_name_suggests_close_timm_names() -> None:
    with pytest.raises(InputError) as e:
        parse_spec("vit_bas_patch16_224")
    assert "unknown model 'vit_bas_patch16_224'" in e.value.message
    assert "vit_base_patch16_224" in (e.value.hint or "")
    assert e.value.exit_code == 2


def test_offline_pretrained_is_one_clear_error_naming_the_ways_out() -> None:
    with pytest.raises(InputError) as e:
        load(TINY_TIMM)  # pretrained, Hub unreachable, not cached
    line = e.value.line()
    assert "cannot fetch" in line and "weights=random" in line and "checkpoint=FILE" in line
    assert "--" not in line  # a Python caller reads its parameters; the CLI maps them to flags
    with pytest.raises(InputError) as e:
        load("hf:bert-base-uncased", RANDOM)  # even random weights need the hub config
    assert e.value.line().startswith(
        "bert-base-uncased is a Hugging Face hub id that cannot be fetched offline"
    )
    assert "--local-dir DIR" in e.value.line()


def test_random_weights_are_reproducible_with_seed() -> None:
    a, b = load(TINY_TIMM, RANDOM), load(TINY_TIMM, RANDOM)
    c = load(TINY_TIMM, LoadOptions(weights="random", seed=4))
    assert _same_weights(a.model, b.model)
    assert not _same_weights(a.model, c.model)
    assert (a.weights, a.source, a.family, a.num_layers) == ("random", "timm", "timm-vit", 12)
    assert not a.model.training


def test_timm_local_folder_and_safetensors_checkpoint(tmp_path: Path) -> None:
    from timm.models import save_for_hf

    torch.manual_seed(0)
    ref = timm.create_model(TINY_TIMM, pretrained=False, depth=2).eval()
    folder = tmp_path / "tiny"
    save_for_hf(ref, str(folder), safe_serialization=True)
    loaded = load(str(folder))  # pretrained from the folder: no network
    assert (loaded.source, loaded.weights, loaded.num_layers) == ("local", "pretrained", 2)
    assert _same_weights(loaded.model, ref)
    # the same weights as a --checkpoint for the architecture, and as MODEL (a file in the folder)
    file = tmp_path / "w.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(file))
    via_ckpt = load(str(folder), LoadOptions(weights="random", checkpoint=file, seed=9))
    assert via_ckpt.weights == "file" and _same_weights(via_ckpt.model, ref)
    via_model = load(str(folder / "model.safetensors"))
    assert via_model.weights == "file" and _same_weights(via_model.model, ref)


def test_pt_state_dict_with_training_wrapper_loads(tmp_path: Path) -> None:
    torch.manual_seed(1)
    ref = timm.create_model(TINY_TIMM, pretrained=False).eval()
    file = tmp_path / "ckpt.pth"
    torch.save({"epoch": 3, "state_dict": {"module." + k: v for k, v in ref.state_dict().items()}}, file)
    loaded = load(TINY_TIMM, LoadOptions(checkpoint=file))
    assert _same_weights(loaded.model, ref) and loaded.weights == "file"


class _RunsCode:
    """A pickle payload that would create a file when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("writer", ["torch.save", "pickle.dump"])
def test_code_running_pickle_is_refused_and_never_runs(tmp_path: Path, writer: str) -> None:
    marker = tmp_path / "pwned"
    file = tmp_path / "evil.pt"
    payload = {"weight": _RunsCode(marker)}
    if writer == "torch.save":
        torch.save(payload, file)
    else:
        with file.open("wb") as fh:
            pickle.dump(payload, fh)
    with pytest.raises(InputError) as e:
        load(TINY_TIMM, LoadOptions(checkpoint=file))
    assert "refusing to load" in e.value.message and "would run code" in e.value.message
    assert not marker.exists()
    pickle.loads(pickle.dumps(payload))  # the payload is live: unpickling it really creates the file
    assert marker.exists()


def test_checkpoint_that_does_not_fit_lists_first_bad_keys(tmp_path: Path) -> None:
    torch.manual_seed(0)
    small = timm.create_model(TINY_TIMM, pretrained=False, depth=2)
    sd = small.state_dict()
    sd["extra.weight"] = torch.zeros(1)
    file = tmp_path / "depth2.safetensors"
    save_file({k: v.contiguous() for k, v in sd.items()}, str(file))
    with pytest.raises(InputError) as e:
        load(TINY_TIMM, LoadOptions(checkpoint=file))  # 12 blocks expected
    msg = e.value.message
    assert "does not fit vit_tiny_patch16_224" in msg
    assert "missing key(s) (blocks.10." in msg and "1 unexpected key(s) (extra.weight)" in msg
    wide = timm.create_model("vit_small_patch16_224", pretrained=False)
    save_file({k: v.contiguous() for k, v in wide.state_dict().items()}, str(file))
    with pytest.raises(InputError, match="shape mismatch"):
        load(TINY_TIMM, LoadOptions(checkpoint=file))


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.safetensors", b"not a safetensors file", "not a readable safetensors file"),
        ("bad.pt", b"garbage", "not a readable PyTorch file"),
        ("weights.npz", b"x", "unsupported file type"),
    ],
)
def test_unreadable_checkpoints(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    file = tmp_path / name
    file.write_bytes(content)
    with pytest.raises(InputError, match=expected):
        load(TINY_TIMM, LoadOptions(checkpoint=file))


def test_checkpoint_holding_no_state_dict(tmp_path: Path) -> None:
    file = tmp_path / "opt.pt"
    torch.save({"epoch": 3, "lr": 0.1}, file)
    with pytest.raises(InputError, match="holds no state dict"):
        load(TINY_TIMM, LoadOptions(checkpoint=file))
    with pytest.raises(InputError, match="no such file"):
        load(TINY_TIMM, LoadOptions(checkpoint=tmp_path / "missing.safetensors"))


def test_bad_local_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no config\.json"):
        load(str(tmp_path))
    lonely = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(1)}, str(lonely))
    with pytest.raises(InputError, match="architecture is unknown") as e:
        load(str(lonely))
    assert "checkpoint=" in (e.value.hint or "") and e.value.params == ("checkpoint",)
    with pytest.raises(InputError, match="no such file or folder"):
        load(str(tmp_path / "nope"))
    (tmp_path / "config.json").write_text('{"hello": 1}')
    with pytest.raises(InputError, match="neither a timm 'architecture' nor an HF 'model_type'"):
        load(str(tmp_path))
    (tmp_path / "config.json").write_text('{"model_type": "no-such-family"}')
    with pytest.raises(InputError, match="cannot load the config of"):
        load(str(tmp_path), RANDOM)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON"):
        load(str(tmp_path))


def test_remote_code_needs_the_explicit_flag(tmp_path: Path) -> None:
    config = {"model_type": "customx", "auto_map": {"AutoConfig": "configuration_x.XConfig"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError) as e:
        load(str(tmp_path), RANDOM)
    assert "trust_remote_code=True" in e.value.line()


def test_hf_local_folder_with_tokenizer_and_random_init(tmp_path: Path) -> None:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    ref = BertModel(cfg).eval()
    ref.save_pretrained(tmp_path)
    loaded = load(str(tmp_path))
    assert (loaded.source, loaded.weights, loaded.num_layers) == ("local", "pretrained", 2)
    assert _same_weights(loaded.model, ref)
    assert loaded.preprocessing.tokenizer is None  # no tokenizer files: random token ids, labelled
    assert "random token ids" in loaded.preprocessing.describe
    again = load(str(tmp_path), LoadOptions(weights="random", seed=5))
    assert again.weights == "random" and not _same_weights(again.model, ref)


def test_weights_option_and_device_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="weights='trained' is not known"):
        load(TINY_TIMM, LoadOptions(weights="trained"))  # type: ignore[arg-type]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match="CUDA is not available") as e:
        load(TINY_TIMM, LoadOptions(weights="random", device="cuda"))
    assert e.value.exit_code == 2
    with pytest.raises(UsageError, match="unknown device"):
        load(TINY_TIMM, LoadOptions(weights="random", device="tpu"))
    assert load(TINY_TIMM, LoadOptions(weights="random", device="auto")).device == torch.device("cpu")


def test_dtype_option_runs_the_model_in_that_dtype() -> None:
    loaded = load(TINY_TIMM, LoadOptions(weights="random", dtype="float64"))
    assert loaded.dtype == torch.float64
    with pytest.raises(UsageError, match="unknown dtype"):
        load(TINY_TIMM, LoadOptions(weights="random", dtype="float8"))
