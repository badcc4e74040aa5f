"""Loading a model that a careless or hostile user broke (issue 17, items 4, 6 and 20): every case is one
InputError (exit 2) naming the file and what to do — never an internal error, never a build that eats all
memory, never a NaN blamed on the inputs. The MODEL folder's own weights and ``checkpoint`` are read by one
reader, so the same broken file says the same thing both ways."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import timm
import torch
from safetensors.torch import save_file

from condcli.errors import InputError
from condcli.loading.sources import LoadOptions, load
from tests import loading_folders as lf

FOLDERS: dict[str, Callable[..., Path]] = {"timm": lf.timm_folder, "hf": lf.hf_folder}
CHECKPOINT = LoadOptions(weights="random")


def _error(model: str, options: LoadOptions | None = None) -> InputError:
    with pytest.raises(InputError) as e:
        load(model, options)
    assert e.value.exit_code == 2
    return e.value


@pytest.mark.parametrize("corruption", sorted(lf.CORRUPTIONS))
@pytest.mark.parametrize("kind", sorted(FOLDERS))
def test_corrupt_safetensors_in_a_folder_says_what_checkpoint_says(
    tmp_path: Path, kind: str, corruption: str
) -> None:
    folder = FOLDERS[kind](tmp_path / "m")
    file = folder / "model.safetensors"
    copy = tmp_path / "copy.safetensors"
    copy.write_bytes(file.read_bytes())
    lf.CORRUPTIONS[corruption](file)
    lf.CORRUPTIONS[corruption](copy)
    as_folder = _error(str(folder))
    assert f"{file} is not a readable safetensors file" in as_folder.message
    as_checkpoint = _error(str(folder), LoadOptions(weights="random", checkpoint=copy))
    reason = as_folder.message.split("file (", 1)[1]
    assert as_checkpoint.message == f"`checkpoint={copy}` is not a readable safetensors file ({reason}"
    assert as_folder.hint == as_checkpoint.hint


@pytest.mark.parametrize("kind", sorted(FOLDERS))
def test_unsafe_pickle_in_a_folder_is_refused_and_never_runs(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "pwned"
    file = lf.unsafe_bin(FOLDERS[kind](tmp_path / "m"), marker)
    err = _error(str(tmp_path / "m"))
    assert f"refusing to load {file}" in err.message
    assert "weights_only" not in err.line()
    assert not marker.exists()


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("n_embd", "big", "'n_embd' is 'big', not a positive integer"),
        ("n_embd", -5, "'n_embd' is -5, not a positive integer"),
        ("n_embd", 1e9, "'n_embd' is 1000000000.0, not a positive integer"),
        ("n_layer", -5, "'n_layer' is -5, not a non-negative integer"),
    ],
)
def test_hf_config_values_of_the_wrong_type_or_sign(
    tmp_path: Path, field: str, value: Any, says: str
) -> None:
    folder = lf.hf_folder(tmp_path, **{field: value})
    assert _error(str(folder)).message == f"{folder / 'config.json'}: {says}"


def test_timm_config_values_and_architecture(tmp_path: Path) -> None:
    folder = lf.timm_folder(tmp_path / "a", depth="deep")
    assert "'model_args.depth' is 'deep', not a non-negative integer" in _error(str(folder)).message
    folder = lf.timm_folder(tmp_path / "b")
    lf.edit_config(folder, lambda cfg: cfg.update(architecture="vit_tiny_patch16_2244"))
    err = _error(str(folder))
    assert (
        err.message == f"{folder / 'config.json'}: 'architecture' 'vit_tiny_patch16_2244' is not a timm model"
    )
    assert "vit_tiny_patch16_224" in (err.hint or "")
    folder = lf.timm_folder(tmp_path / "c", no_such_argument=1)
    assert "describes cannot be built (TypeError" in _error(str(folder)).message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2]", "is not a JSON object (it is list)"),
        ("null", "is not a JSON object (it is NoneType)"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"model_type": ', "invalid JSON"),
    ],
)
def test_config_json_that_is_not_a_config(tmp_path: Path, text: str, says: str) -> None:
    folder = lf.hf_folder(tmp_path)
    (folder / "config.json").write_text(text)
    err = _error(str(folder))
    assert str(folder / "config.json") in err.message and says in err.message


def test_absurd_sizes_are_refused_before_anything_is_allocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10^8 blocks: the estimate is extrapolated from builds with 1 and 2 blocks, in well under a minute
    timm_err = _error(str(lf.timm_folder(tmp_path / "t", depth=100_000_000)))
    assert str(tmp_path / "t" / "config.json") in timm_err.message
    assert "depth = 100000000" in (timm_err.hint or "")
    hf_err = _error(str(lf.hf_folder(tmp_path / "h", n_layer=10_000_000)), CHECKPOINT)
    assert "n_layer = 10000000" in (hf_err.hint or "")
    wide = _error(str(lf.hf_folder(tmp_path / "w", n_embd=10**9, n_head=1)), CHECKPOINT)
    assert "asks for a model of at least" in wide.message  # stopped at the first huge parameter
    # a sane model that does not fit the memory there is refused too, with the numbers
    from condcli.loading import model_size

    monkeypatch.setattr(model_size, "available_memory", lambda device: (1 << 16, "in this test"))
    small = _error(str(lf.timm_folder(tmp_path / "s")))
    assert "asks for a model of at least" in small.message  # the build was stopped there
    assert "more than the 0.0625 MiB in this test" in small.message


def _meta_params(build: Callable[[], torch.nn.Module]) -> int:
    with torch.device("meta"):
        model = build()
    return sum(p.numel() for p in model.parameters())


def _timm_estimate(folder: Path) -> tuple[int, dict[str, Any]]:
    from condcli.loading import model_size

    args = json.loads((folder / "config.json").read_text())["model_args"]

    def build(model_args: dict[str, Any]) -> Any:
        return timm.create_model(f"local-dir:{folder}", pretrained=False, **model_args)

    size = model_size.estimate(build, args, args, None)
    assert size is not None
    return size.params, args


def test_estimated_size_is_the_models_own_count(tmp_path: Path) -> None:
    """1 block (built as it is) counted by hand; 300 blocks (above the 256 built as they are, so
    extrapolated from 1 and 2) equal the count of the model timm builds."""
    params, _ = _timm_estimate(lf.timm_folder(tmp_path / "one"))
    d, h = 32, 128  # patch embedding, cls token, 17 positions, one block, the final norm
    assert (
        params == (3 * 8 * 8 * d + d) + d + 17 * d + (4 * d + 4 * d * d + 4 * d + 2 * d * h + h + d) + 2 * d
    )
    params, args = _timm_estimate(lf.timm_folder(tmp_path / "deep", depth=300))
    reference = _meta_params(lambda: timm.create_model("vit_tiny_patch16_224", pretrained=False, **args))
    assert params == reference


@pytest.mark.parametrize("kind", sorted(FOLDERS))
def test_non_finite_weight_is_named_with_its_file(tmp_path: Path, kind: str) -> None:
    folder = FOLDERS[kind](tmp_path / "m")
    file = folder / "model.safetensors"
    name = lf.poison(file)
    err = _error(str(folder))
    assert f"'{name}'" in err.message and f"(from {file})" in err.message and "1 NaN/Inf" in err.message
    ckpt = tmp_path / "ckpt.safetensors"
    ckpt.write_bytes(file.read_bytes())
    err = _error(str(folder), LoadOptions(weights="random", checkpoint=ckpt))
    assert f"(from {ckpt})" in err.message and "inputs" not in err.line()


def test_overflow_in_a_cast_is_named(tmp_path: Path) -> None:
    folder = lf.timm_folder(tmp_path)
    name = lf.poison(folder / "model.safetensors", 1e6)  # finite in float32, inf in float16
    err = _error(str(folder), LoadOptions(dtype="float16"))
    assert err.message.startswith(f"after the cast to float16, weight '{name}'")


@pytest.mark.parametrize("kind", sorted(FOLDERS))
def test_quantized_tensor_for_a_float_weight(tmp_path: Path, kind: str) -> None:
    folder = FOLDERS[kind](tmp_path / "m")
    name = lf.to_int8(folder / "model.safetensors")
    assert "I8 in" in _error(str(folder)).message
    if kind == "hf":
        return  # a GPT-2 file leaves out its tied lm_head.weight: as a checkpoint it does not fit (known)
    ckpt = tmp_path / "q.safetensors"
    ckpt.write_bytes((folder / "model.safetensors").read_bytes())
    err = _error(str(folder), LoadOptions(weights="random", checkpoint=ckpt))
    assert "not real floating point" in err.message and f"{name} int8" in err.message


def test_folder_without_weights_and_weights_that_are_folders(tmp_path: Path) -> None:
    folder = lf.hf_folder(tmp_path / "m")
    (folder / "model.safetensors").unlink()
    err = _error(str(folder))
    assert "has a config.json but no weights file" in err.message and "weights=random" in (err.hint or "")
    assert load(str(folder), CHECKPOINT).weights == "random"
    (folder / "model.safetensors").mkdir()
    assert "model.safetensors is a folder, not a weights file" in _error(str(folder)).message
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    save_file({"a": torch.zeros(1)}, str(ckpt_dir / "w.safetensors"))
    err = _error(str(folder), LoadOptions(weights="random", checkpoint=ckpt_dir))
    assert err.message == f"`checkpoint={ckpt_dir}` is a folder, not a weights file"
    assert "w.safetensors" in (err.hint or "")


def test_weights_of_other_shapes_and_a_text_file_as_model(tmp_path: Path) -> None:
    folder = lf.hf_folder(tmp_path / "m")
    file = folder / "model.safetensors"
    from safetensors.torch import load_file

    sd = load_file(str(file))
    name = lf.first_matrix(file)
    expected = list(sd[name].shape)
    sd[name] = torch.zeros(3, 3)
    save_file(sd, str(file), metadata={"format": "pt"})
    said = f"weight '{name}' in {file} has shape [3, 3], the model expects {expected}"
    assert _error(str(folder)).message == said  # issue 38: the file, the tensor and both shapes
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "is not a model folder, a weights file" in _error(str(text)).message


def test_valid_folders_load_as_before(tmp_path: Path) -> None:
    for kind, make in FOLDERS.items():
        folder = make(tmp_path / kind)
        loaded = load(str(folder))
        ref = load_file_state(folder / "model.safetensors")
        state = loaded.model.state_dict()
        matched = [k for k in state if k in ref or f"transformer.{k}" in ref]
        assert matched and all(
            torch.equal(state[k], ref.get(k, ref.get(f"transformer.{k}"))) for k in matched
        )


def load_file_state(file: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(file))


def test_sharded_folder_names_the_shard(tmp_path: Path) -> None:
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    folder = lf.hf_folder(tmp_path / "m")
    AutoModelForCausalLM.from_pretrained(folder).save_pretrained(folder, max_shard_size="20KB")
    (folder / "model.safetensors").unlink()  # transformers would read it before the index
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shard = folder / sorted(set(index.values()))[1]
    name = lf.poison(shard, float("nan"))
    assert name in load_file(str(shard))
    assert f"'{name}'" in (err := _error(str(folder))).message and f"(from {shard})" in err.message
    shard.unlink()
    err = _error(str(folder))
    assert err.message == f"{shard} (named in {folder / 'model.safetensors.index.json'}): no such file"
    (folder / "model.safetensors.index.json").write_text("{}")
    assert "has no 'weight_map'" in _error(str(folder)).message
