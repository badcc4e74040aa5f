"""MODEL names as users type them (docs/guides/your-own-model.md#model-names): an existing path, a sample,
a timm name, then the Hugging Face hub; a near miss of a sample or timm name gets "did you mean"; a name that
could be two things says so in one line; offline, a hub id is one line naming it and the way to a local
folder."""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import timm
from click.testing import Result

from condcli.errors import InputError
from condcli.loading.names import NEAR, parse_spec
from condcli.loading.samples import SAMPLES_ENV, sample_names, samples_dir
from condcli.loading.sources import LoadOptions, load

HUB_IDS = ["bert-base-uncased", "gpt2", "roberta-base", "distilbert-base-uncased", "t5-small"]


def _similarity(name: str) -> float:
    """The rule's measure, computed here from difflib directly: the closest sample or timm name."""
    key = name.lower().replace("-", "_")
    pool = [p.lower().replace("-", "_") for p in [*sample_names(), *timm.list_models()]]
    return max(difflib.SequenceMatcher(None, key, p).ratio() for p in pool)


def test_unprefixed_names_resolve_path_then_sample_then_timm_then_hub(tmp_path: Path) -> None:
    sample = parse_spec("vit-plain")
    assert (sample.kind, Path(sample.target), sample.note) == ("local", samples_dir() / "vit-plain", None)
    timm_name = parse_spec("vit_tiny_patch16_224")
    assert (timm_name.kind, timm_name.target, timm_name.note) == ("timm", "vit_tiny_patch16_224", None)
    for name in ("google/vit-base-patch16-224", *HUB_IDS):
        spec = parse_spec(name)
        assert (spec.kind, spec.target, spec.unprefixed_hub) == ("hf", name, True)
    (tmp_path / "config.json").write_text("{}")
    assert parse_spec(str(tmp_path)).kind == "local"
    # the prefixes force a source, whatever else the name is
    assert (parse_spec("hf:vit-plain").kind, parse_spec("hf:vit-plain").target) == ("hf", "vit-plain")
    assert not parse_spec("hf:bert-base-uncased").unprefixed_hub
    assert (parse_spec("timm:vit-plain").kind, parse_spec("timm:vit-plain").target) == ("timm", "vit-plain")


@pytest.mark.parametrize("name", HUB_IDS)
def test_a_bare_hub_id_is_far_from_every_sample_and_timm_name(name: str) -> None:
    assert _similarity(name) < NEAR  # why the rule sends it to the hub
    assert parse_spec(name).kind == "hf"


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("vit-plian", "vit-plain"),  # a sample's name, two letters swapped
        ("vit_base_patch16_22", "vit_base_patch16_224"),  # a timm name, cut short
        ("vit-base-patch16-224", "vit_base_patch16_224"),  # a timm name written as hub ids are
        ("resnet5", "resnet50"),
    ],
)
def test_a_near_miss_is_a_typo_with_did_you_mean_not_a_hub_id(typed: str, meant: str) -> None:
    assert _similarity(typed) >= NEAR
    with pytest.raises(InputError) as e:
        parse_spec(typed)
    assert e.value.message == f"unknown model {typed!r}" and e.value.exit_code == 2
    hint = e.value.hint or ""
    assert hint.startswith("did you mean ") and meant in hint.split("?")[0]
    assert f"; hf:{typed} for a Hugging Face hub id)" in hint  # the way to the hub all the same


@pytest.mark.parametrize(
    ("typed", "text"),
    [
        ("vit plain", "unknown model 'vit plain'"),  # not a valid hub id either
        ("a/b/c", "a/b/c: no such file or folder, and not a Hugging Face hub id"),
        ("report.json", "report.json: no such file or folder"),
        ("weights.safetensors", "weights.safetensors: no such file or folder"),
    ],
)
def test_what_is_neither_a_path_nor_a_hub_id_is_one_error(typed: str, text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_spec(typed)
    assert text in e.value.line() and "\n" not in e.value.line()


def test_a_local_folder_named_like_a_sample_is_used_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(samples_dir() / "vit-plain", tmp_path / "vit-plain")
    monkeypatch.chdir(tmp_path)
    spec = parse_spec("vit-plain")
    assert (spec.kind, Path(spec.target)) == ("local", Path("vit-plain"))
    assert spec.note is not None and "\n" not in spec.note
    assert spec.note.startswith("'vit-plain' is the local folder vit-plain and also a shipped sample's name")
    assert f"give {samples_dir() / 'vit-plain'} for the sample" in spec.note
    loaded = load("vit-plain", LoadOptions(device="cpu"))
    assert loaded.notes[0] == spec.note  # it reaches the report's notes


def test_a_local_folder_named_like_a_timm_model_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "resnet18").mkdir()
    (tmp_path / "resnet18" / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    spec = parse_spec("resnet18")
    assert spec.kind == "local" and spec.note is not None
    assert "also a timm model name: the local one is used (timm:resnet18 for timm's)" in spec.note
    assert parse_spec("timm:resnet18").kind == "timm"


def test_a_sample_named_like_a_timm_model_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "resnet18").mkdir()
    (tmp_path / "resnet18" / "config.json").write_text("{}")
    monkeypatch.setenv(SAMPLES_ENV, str(tmp_path))
    monkeypatch.chdir(tmp_path / "resnet18")  # no ./resnet18 here
    spec = parse_spec("resnet18")
    assert (spec.kind, Path(spec.target)) == ("local", tmp_path / "resnet18")
    assert spec.note == (
        "'resnet18' is a shipped sample and also a timm model name: the sample is used "
        "(timm:resnet18 for timm's)"
    )


def _cache_repo(cache: Path, repo: str) -> None:
    """What huggingface_hub's cache holds after downloading ``repo``'s config.json."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    snapshot = folder / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")


def test_a_timm_name_that_is_also_a_cached_hub_id_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert parse_spec("resnet18").note is None  # nothing cached: nothing says it is on the hub
    _cache_repo(tmp_path, "resnet18")
    spec = parse_spec("resnet18")
    assert spec.kind == "timm"
    assert spec.note == (
        "'resnet18' is a timm model name and also a Hugging Face hub id in the local cache: "
        "the timm model is used (hf:resnet18 for the hub's)"
    )


@pytest.mark.parametrize(
    ("model", "unprefixed"),
    [("bert-base-uncased", True), ("google/vit-base-patch16-224", True), ("hf:bert-base-uncased", False)],
)
@pytest.mark.parametrize("how", ["unreachable", "HF_HUB_OFFLINE"])
def test_offline_a_hub_id_is_one_line_naming_it_and_the_way_to_a_local_folder(
    model: str, unprefixed: bool, how: str, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    if how == "HF_HUB_OFFLINE":  # the user said so: the hub is not even probed
        from condcli.loading import hub

        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(
            hub, "reachable", lambda: pytest.fail("probed the hub though HF_HUB_OFFLINE is set")
        )
    repo = model.removeprefix("hf:")
    reason = "HF_HUB_OFFLINE is set" if how == "HF_HUB_OFFLINE" else "the hub is not reachable"
    for weights in ("pretrained", "random"):  # even random weights need the hub's config.json
        result = cli("spectrum", model, "--weights", weights)
        assert result.exit_code == 2, result.output
        assert result.stdout == "" and len(result.stderr.strip().splitlines()) == 1
        taken = " (not a local path, a sample or a timm name)" if unprefixed else ""
        assert result.stderr.startswith(
            f"error: {repo} is a Hugging Face hub id{taken} that cannot be fetched offline ({reason}) and is "
            "not in the local cache — download it where there is network "
            f"(huggingface-cli download {repo} --local-dir DIR, or save_pretrained(DIR)) "
            "and give that folder DIR as MODEL"
        ), result.stderr
