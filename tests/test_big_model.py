"""Models bigger than one device (issue 18 item 3): ``--device-map`` / ``--max-memory`` through accelerate.

On CPU the split is forced: a ``--max-memory`` CPU budget smaller than the model puts some blocks on disk.
The report must be the unsplit model's, number for number; only the loading notes and the added
``model.device_map`` differ. The captured X, X_l and P of a dispatched model are checked against the model's
own ``hidden_states`` / ``output_attentions`` (an unsplit copy, eager attention).
"""

from __future__ import annotations

import gc
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import Result

from condcli.capture import capture, exact_lookup
from condcli.errors import UsageError
from condcli.inputs.batches import Batch
from condcli.loading.big_model import parse_max_memory, placement
from condcli.loading.sources import LoadOptions, load

SIZES = {"GiB": 2**30, "GB": 10**9, "MiB": 2**20, "KB": 10**3}


def _bert(folder: Path) -> Path:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64, vocab_size=96
    )
    BertModel(cfg).save_pretrained(folder)
    return folder


def _gpt2(folder: Path) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        n_embd=32, n_layer=4, n_head=2, n_positions=32, vocab_size=96, bos_token_id=0, eos_token_id=0
    )
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    return folder


def _llama(folder: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=96,
        max_position_embeddings=64,
    )
    LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder


FOLDERS: dict[str, Callable[[Path], Path]] = {"bert": _bert, "gpt2": _gpt2, "llama": _llama}


def _budget(folder: Path, fraction: float = 0.55) -> str:
    """A CPU budget of ``fraction`` of the weights: the rest must go to disk."""
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    return f"cpu={int(size * fraction)},disk"


def _report(cli: Callable[..., Result], *args: str) -> dict[str, Any]:
    result = cli("spectrum", *args, "--max-samples", "4", "--batch-size", "3", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == "", result.stderr  # no accelerate warning, no progress line
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _same_but_placement(whole: dict[str, Any], split: dict[str, Any]) -> dict[str, Any]:
    """The split report equals the whole one but for model.device_map (added) and the loading note saying
    where the modules went; returns that device map."""
    placed = split["model"].pop("device_map")
    assert "device_map" not in whole["model"]
    notes = [n for n in split["notes"] if not n.startswith("device map ")]
    assert len(notes) == len(split["notes"]) - 1
    assert notes == whole["notes"]
    whole, split = dict(whole), dict(split)
    whole.pop("notes"), split.pop("notes")
    assert split == whole  # every number bitwise: JSON floats are printed with all their digits
    return dict(placed)


@pytest.mark.parametrize("family", sorted(FOLDERS))
def test_split_over_cpu_and_disk_gives_the_unsplit_report(
    tmp_path: Path, cli: Callable[..., Result], family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = FOLDERS[family](tmp_path / family)
    offload = tmp_path / "tmp"
    offload.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(offload))
    whole = _report(cli, str(folder))
    split = _report(cli, str(folder), "--device-map", "auto", "--max-memory", _budget(folder))
    if family == "gpt2":  # also built first (random weights), then dispatched
        random = ("--weights", "random")
        built = _report(cli, str(folder), *random, "--device-map", "auto", "--max-memory", _budget(folder))
        assert set(_same_but_placement(_report(cli, str(folder), *random), built)["modules"].values()) == {
            "cpu",
            "disk",
        }
    placed = _same_but_placement(whole, split)
    assert placed["strategy"] == "auto" and placed["disk"] is True
    assert set(placed["modules"].values()) == {"cpu", "disk"}, placed
    gc.collect()
    assert list(offload.iterdir()) == []  # the offload folder went with the model


def test_a_timm_vit_split_gives_the_unsplit_report(cli: Callable[..., Result]) -> None:
    from condcli.loading.samples import samples_dir

    whole = _report(cli, "vit-plain")
    split = _report(
        cli,
        "vit-plain",
        "--device-map",
        "sequential",
        "--max-memory",
        _budget(samples_dir() / "vit-plain", 0.4),
    )
    placed = _same_but_placement(whole, split)
    assert set(placed["modules"].values()) == {"cpu", "disk"}, placed


def test_a_block_reading_a_submodules_weight_directly_is_loaded_whole(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    """timm's EVA attention reads ``qkv.weight`` without calling ``qkv``: an offloaded block must load all
    its weights as it starts, else the split run differs (or computes with NaN)."""
    (tmp_path / "eva.py").write_text(
        "import timm\n\n\ndef build():\n"
        "    return timm.create_model('eva02_tiny_patch14_224', depth=4, img_size=28, num_classes=0)\n"
    )
    model = f"{tmp_path / 'eva.py'}:build"
    whole = _report(cli, model)
    budget = "cpu=4500000,disk"  # of its 7.6 MB of weights
    placed = _same_but_placement(
        whole, _report(cli, model, "--device-map", "sequential", "--max-memory", budget)
    )
    assert [k for k, d in placed["modules"].items() if k.startswith("blocks.") and d == "disk"], placed


def test_the_table_header_names_the_placement(tmp_path: Path, cli: Callable[..., Result]) -> None:
    folder = _gpt2(tmp_path / "g")
    result = cli(
        "spectrum", str(folder), "--max-samples", "2", "--device-map", "auto", "--max-memory", _budget(folder)
    )
    assert result.exit_code == 0, result.output
    line = result.stdout.splitlines()[1]
    assert line.startswith("device map auto: cpu ") and "disk" in line, result.stdout


def test_dispatched_capture_matches_the_models_own_tensors(
    tmp_path: Path, hook_count: Callable[..., int]
) -> None:
    """X, X_l and P of a model spread over CPU and disk: against an unsplit copy's hidden_states and
    output_attentions (eager, as the conformance test), and entry for entry against the unsplit capture."""
    from transformers import GPT2Model

    folder = _gpt2(tmp_path / "g")
    loaded = load(str(folder), LoadOptions(device_map="auto", max_memory=_budget(folder)))
    assert loaded.device_map is not None and "disk" in loaded.device_map["modules"].values()
    # pretrained weights are read straight onto the map, made for the whole GPT2LMHeadModel
    assert any(k.startswith("transformer.h.") for k in loaded.device_map["modules"]), loaded.device_map
    whole = load(str(folder))
    reference = GPT2Model.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.randint(0, 96, (2, 7), generator=torch.Generator().manual_seed(1))
    batch = Batch({"input_ids": ids}, None, ["a", "b"])
    got, want = capture(loaded.adapter, batch), capture(whole.adapter, batch)
    with torch.no_grad():
        out = reference(ids, output_hidden_states=True, output_attentions=True)
    assert torch.equal(got.x, out.hidden_states[0]) and torch.equal(got.x, want.x)
    assert sorted(got.layers) == [0, 1, 2, 3]
    for i, layer in got.layers.items():
        assert layer.x_in is not None and layer.probs is not None and layer.attn_in is not None
        x_l, p = layer.x_in.double(), layer.probs.reshape(out.attentions[i].shape).double()
        torch.testing.assert_close(x_l, out.hidden_states[i].double(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(p, out.attentions[i].double(), rtol=1e-4, atol=1e-5)
        for probe in ("x_in", "attn_in", "probs"):
            assert torch.equal(getattr(layer, probe), getattr(want.layers[i], probe))
    assert hook_count(loaded.model) == 0
    # the W slices read the offloaded blocks' weights back
    w = loaded.adapter.layers[-1].weights()
    qkv = reference.h[-1].attn.c_attn.weight.detach().double()  # Conv1D (d, 3d): [Q | K | V]
    assert torch.equal(w.wq.permute(1, 0, 2).reshape(32, 32), qkv[:, :32])


def test_an_embedding_offloaded_to_disk_is_still_an_exact_lookup(tmp_path: Path) -> None:
    from accelerate import dispatch_model
    from transformers import LlamaModel

    folder = _llama(tmp_path / "l")
    model = LlamaModel.from_pretrained(folder).eval()
    ids = torch.randint(0, 96, (2, 5), generator=torch.Generator().manual_seed(2))
    x = model.embed_tokens(ids).detach()
    names = [n for n, _ in model.named_children()]
    dispatch_model(
        model, {n: "disk" if n == "embed_tokens" else "cpu" for n in names}, offload_dir=tmp_path / "o"
    )
    assert model.embed_tokens.weight.device.type == "meta"
    assert exact_lookup(model, x, {"input_ids": ids})
    assert not exact_lookup(model, x * 2, {"input_ids": ids})


def test_a_failed_dispatch_leaves_no_offload_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built then dispatched (random weights), or read onto the map (pretrained): interrupted, no folder."""
    import accelerate
    from transformers import GPT2LMHeadModel

    folder = _gpt2(tmp_path / "g")
    offload = tmp_path / "tmp"
    offload.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(offload))

    def broken(*args: Any, **kwargs: Any) -> None:
        where = kwargs.get("offload_dir") or kwargs.get("offload_folder")
        assert where is not None and Path(where).is_dir()
        raise KeyboardInterrupt

    monkeypatch.setattr(accelerate, "dispatch_model", broken)
    monkeypatch.setattr(GPT2LMHeadModel, "from_pretrained", broken)
    for weights in ("random", "pretrained"):
        with pytest.raises(KeyboardInterrupt):
            load(str(folder), LoadOptions(weights=weights, device_map="auto", max_memory=_budget(folder)))  # type: ignore[arg-type]
        assert list(offload.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "budget", "disk"),
    [
        ("cpu=2GiB", {"cpu": 2 * SIZES["GiB"]}, False),
        ("CPU=1.5GB, disk", {"cpu": 1_500_000_000}, True),
        ("cpu=512MiB,disk", {"cpu": 512 * SIZES["MiB"]}, True),
        ("cpu=4096", {"cpu": 4096}, False),
        ("disk,cpu=3KB", {"cpu": 3000}, True),
    ],
)
def test_max_memory_syntax(text: str, budget: dict[str, int], disk: bool) -> None:
    assert parse_max_memory(text) == (budget, disk)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device-map", "everywhere"], "--device-map everywhere is not known"),
        (["--max-memory", "cpu=1GiB"], "--max-memory is given without --device-map"),
        (["--device-map", "auto", "--device", "cpu"], "--device cpu and --device-map are both given"),
        (["--device-map", "auto", "--max-memory", "cpu=lots"], "--max-memory: cpu='lots' is not a size"),
        (["--device-map", "auto", "--max-memory", "cpu=0"], "is zero"),
        (["--device-map", "auto", "--max-memory", "cpu=2PiB"], "is not a size"),
        (["--device-map", "auto", "--max-memory", "cpu=9999TiB"], "more than 1 PiB"),
        (["--device-map", "auto", "--max-memory", "cpu=1.5"], "a number of bytes is whole"),
        (["--device-map", "auto", "--max-memory", "cpu=1GB,cpu=2GB"], "cpu is given twice"),
        (["--device-map", "auto", "--max-memory", "cpu"], "cpu has no size"),
        (["--device-map", "auto", "--max-memory", "disk=1GB"], "disk takes no size"),
        (["--device-map", "auto", "--max-memory", "disk"], "budgets no GPU and no CPU"),
        (["--device-map", "auto", "--max-memory", "tpu=1GB"], "unknown device 'tpu'"),
        (["--device-map", "auto", "--max-memory", "GPU9=1GB"], "GPU9 is not on this machine"),
        (["--device-map", "auto", "--max-memory", "cpu=1GB,,disk"], "an empty entry"),
        (["--device-map", "auto", "--max-memory", "cpu=10KB"], "does not fit in the memory budgeted"),
        (["--device-map", "auto", "--max-memory", "cpu=10KB,disk"], "leaves no device room"),
    ],
)
def test_bad_placement_is_one_line_naming_the_flag(
    cli: Callable[..., Result], args: list[str], says: str
) -> None:
    result = cli("spectrum", "vit-plain", "--max-samples", "1", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert says in lines[0], lines[0]


def test_placement_without_device_map_is_none() -> None:
    assert placement(None, None) is None
    with pytest.raises(UsageError):
        placement("auto", None, "cuda:0")


def test_a_model_larger_than_memory_is_refused_unless_read_onto_a_device_map() -> None:
    """model_size: 4 TB of weights exceed any RAM here; read onto a device map (which may offload to disk
    and says itself whether the model fits) the memory is not compared."""
    from torch import nn

    from condcli.errors import InputError
    from condcli.loading.model_size import check_fits

    def build(cfg: dict[str, int]) -> nn.Module:
        return nn.Linear(cfg["hidden_size"], cfg["hidden_size"])

    cfg = {"hidden_size": 10**6}
    with pytest.raises(InputError, match="more than the"):
        check_fits(build, cfg, cfg, "big/config.json", torch.device("cpu"))
    size = check_fits(build, cfg, cfg, "big/config.json", torch.device("cpu"), spill=True)
    assert size is not None and size.params == 10**12 + 10**6
