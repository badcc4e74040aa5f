"""The shipped sample checkpoints: each loads through condcli's normal sources and runs the spectra, and its
recorded held-out metric and κ(X) are reproduced from the shipped weights with independent code (timm/HF
directly, float64 NumPy), not read back from metadata.json.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.capture import capture
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.samples import METADATA, sample_names, samples_dir
from condcli.loading.sources import LoadOptions, load
from samplegen import shapes, train_lm
from tests.helpers import np_kappa, np_shifted_kappa

CONDITIONED_LAMBDA = 1.0  # vit-conditioned's λ, chosen by the λ study (docs/samples.md); build.py rebuilds it

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("vit-plain", "vit-conditioned", "gpt2-docstrings", "bert-docstrings", "llama-docstrings")
TEXT = ("gpt2-docstrings", "bert-docstrings")  # trained in blocks of 128 by samplegen.train_lm
LLAMA = "llama-docstrings"


def meta(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((samples_dir() / name / METADATA).read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def vit_heldout() -> tuple[np.ndarray, np.ndarray]:
    data = meta("vit-plain")["data"]["heldout"]
    images, labels = shapes.make_shapes(data["count"], data["seed"])
    assert shapes.digest(images, labels) == data["sha256"], (
        "the shapes10 generator no longer gives the same data"
    )
    return images, labels


def test_the_set_is_shipped_complete_and_small() -> None:
    assert set(SHIPPED) <= set(sample_names())
    total = 0
    for name in SHIPPED:
        folder = samples_dir() / name
        files = {p.name for p in folder.iterdir()}
        assert {"config.json", "model.safetensors", METADATA} <= files
        if name in (*TEXT, LLAMA):
            assert {"tokenizer.json", "tokenizer_config.json", "heldout.txt"} <= files
        m = meta(name)
        for key in ("description", "architecture", "task", "data", "training", "heldout", "embedding"):
            assert m[key], (name, key)
        assert m["seed"] == 0 and m["versions"]["condcli"] and m["versions"]["torch"]
        total += sum(p.stat().st_size for p in folder.iterdir())
    assert total < 25e6, f"the samples take {total / 1e6:.1f} MB"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_sample_loads_and_runs_the_spectra(name: str) -> None:
    loaded = load(name, LoadOptions(device="cpu"))
    assert loaded.source == "local" and loaded.weights == "pretrained"
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=4, batch_size=4))))
    cap = capture(loaded.adapter, batch)
    assert len(cap.layers) == loaded.num_layers
    for x in cap.samples():
        s = spectra.summarize(x)
        distinct = len(np.unique(x.double().numpy(), axis=0))
        # finite unless a token repeats in a model whose X carries no positions (the Llama: rotary)
        assert torch.isfinite(s.kappa).all() or (name == LLAMA and distinct < min(x.shape))
        np.testing.assert_allclose(float(s.kappa), np_kappa(x.double().numpy()), rtol=1e-9)
    for layer in cap.layers.values():
        kappa = spectra.condition_number(layer.attn_in).reshape(-1)
        assert layer.probs is not None and len(kappa) == len(batch.names)
        for a, k in zip(layer.attn_in.reshape(len(kappa), *layer.attn_in.shape[-2:]), kappa, strict=True):
            repeats = len(np.unique(a.double().numpy(), axis=0)) < min(a.shape)  # layer 0 of the Llama
            assert torch.isfinite(k) or (name == LLAMA and repeats)


def _spread_from_uniform(name: str, weights: str) -> list[float]:
    """Per layer: mean over rows of Σ_j |P_ij − 1/n| (0 for uniform attention)."""
    loaded = load(name, LoadOptions(device="cpu", weights=weights))  # type: ignore[arg-type]
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=4))))
    layers = capture(loaded.adapter, batch, probes=("probs",)).layers
    spread = []
    for i in sorted(layers):
        p = layers[i].probs
        assert p is not None
        spread.append(float((p.double() - 1.0 / p.shape[-1]).abs().sum(-1).mean()))
    return spread


@pytest.mark.parametrize("name", ["vit-plain", "vit-conditioned"])
def test_trained_attention_is_far_from_the_near_uniform_random_init(name: str) -> None:
    """The point of shipping trained weights: random-init attention is near uniform, trained is not."""
    trained, random = _spread_from_uniform(name, "pretrained"), _spread_from_uniform(name, "random")
    assert max(random) < 0.1
    assert all(t > 5 * r for t, r in zip(trained, random, strict=True)), (trained, random)


def _timm_reference(name: str) -> torch.nn.Module:
    """The sample built with timm alone (config.json + safetensors), conditioning added by hand."""
    import timm
    from safetensors.torch import load_file

    config = json.loads((samples_dir() / name / "config.json").read_text())
    args = {k: v for k, v in config["model_args"].items() if k != "img_size"}
    model = timm.create_model(config["architecture"], img_size=32, **args)
    model.load_state_dict(load_file(samples_dir() / name / "model.safetensors"))
    lam = (meta(name)["conditioning"] or {}).get("lambda")
    if lam is not None:

        class Shift(torch.nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x + lam * torch.eye(x.shape[1], x.shape[2])

        model.pos_drop = torch.nn.Sequential(model.pos_drop, Shift())
    return model.eval()


def _pixels(images: np.ndarray) -> torch.Tensor:
    x = images.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
    return torch.from_numpy((x - 0.5) / 0.25).contiguous()


@pytest.mark.parametrize("name", ["vit-plain", "vit-conditioned"])
def test_vit_heldout_accuracy_is_reproduced(name: str, vit_heldout: tuple[np.ndarray, np.ndarray]) -> None:
    images, labels = vit_heldout
    pixels = _pixels(images)
    ref = _timm_reference(name)
    with torch.no_grad():
        logits = torch.cat([ref(pixels[i : i + 256]) for i in range(0, len(pixels), 256)]).double()
        via_condcli = load(name, LoadOptions(device="cpu")).model(pixels[:256])
    np.testing.assert_allclose(via_condcli.numpy(), logits[:256].float().numpy(), atol=1e-4)
    accuracy = float((logits.argmax(-1).numpy() == labels).mean())
    probs = torch.log_softmax(logits, -1).numpy()
    loss = float(-probs[np.arange(len(labels)), labels].mean())
    recorded = meta(name)["heldout"]
    assert recorded["metric"] == "accuracy" and recorded["count"] == len(labels)
    assert abs(accuracy - recorded["value"]) <= 1.0 / len(labels)  # at most one near-tie may flip
    assert loss == pytest.approx(recorded["loss"], rel=1e-4)


def test_the_conditioning_is_part_of_the_conditioned_vit(vit_heldout: tuple[np.ndarray, np.ndarray]) -> None:
    images, labels = vit_heldout
    pixels = _pixels(images[:500])
    ref = _timm_reference("vit-conditioned")
    ref.pos_drop = ref.pos_drop[0]  # the same weights without X + λ·I_k
    with torch.no_grad():
        without = float((ref(pixels).argmax(-1).numpy() == labels[:500]).mean())
    # at λ = 1: 83.0% on the 2,000 held-out images with its shift, 72.0% on their first 500 without it, far
    # past the held-out set's own ±0.9-point standard error: the shift is part of what it learned
    assert without < meta("vit-conditioned")["heldout"]["value"] - 0.05


def test_plain_and_conditioned_vit_differ_only_in_the_conditioning() -> None:
    plain, cond = meta("vit-plain"), meta("vit-conditioned")
    assert plain["conditioning"] is None
    assert cond["conditioning"] == {"lambda": CONDITIONED_LAMBDA, "mode": "shift", "at": "pos_drop"}
    assert plain["data"] == cond["data"] and plain["seed"] == cond["seed"]
    recipe_p, recipe_c = dict(plain["training"]["recipe"]), dict(cond["training"]["recipe"])
    assert recipe_p.pop("lam") is None and recipe_c.pop("lam") == CONDITIONED_LAMBDA
    from samplegen.build import CONDITIONED_LAMBDA as rebuilt

    assert rebuilt == CONDITIONED_LAMBDA  # `make samples` rebuilds what ships
    assert recipe_p == recipe_c
    for key in ("steps", "optimizer", "schedule"):
        assert plain["training"][key] == cond["training"][key]
    config_p = json.loads((samples_dir() / "vit-plain" / "config.json").read_text())
    config_c = json.loads((samples_dir() / "vit-conditioned" / "config.json").read_text())
    assert config_p == config_c
    from safetensors.torch import load_file

    sd_p = load_file(samples_dir() / "vit-plain" / "model.safetensors")
    sd_c = load_file(samples_dir() / "vit-conditioned" / "model.safetensors")
    assert {k: v.shape for k, v in sd_p.items()} == {k: v.shape for k, v in sd_c.items()}
    assert any(not torch.equal(sd_p[k], sd_c[k]) for k in sd_p)  # trained apart, so the weights differ


def test_loading_the_conditioned_vit_takes_x_before_the_shift() -> None:
    loaded = load("vit-conditioned", LoadOptions(device="cpu"))
    assert loaded.adapter.builtin is not None and loaded.adapter.builtin.lam == CONDITIONED_LAMBDA
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2))))
    cap = capture(loaded.adapter, batch, layers=[0], probes=("x_in",))
    x, x0 = cap.x.double(), cap.layers[0].x_in
    assert x0 is not None
    torch.testing.assert_close(x0.double(), x + CONDITIONED_LAMBDA * torch.eye(x.shape[1], x.shape[2]))


@pytest.mark.parametrize("name", ["vit-plain", "vit-conditioned"])
def test_vit_embedding_kappa_is_reproduced(name: str, vit_heldout: tuple[np.ndarray, np.ndarray]) -> None:
    emb = meta(name)["embedding"]
    ref = _timm_reference(name)
    if isinstance(ref.pos_drop, torch.nn.Sequential):
        ref.pos_drop = ref.pos_drop[0]  # X is the paper's X: before the model's own shift
    pixels = _pixels(vit_heldout[0][: emb["samples"]])
    with torch.no_grad():  # X = patch embedding + class token + position embedding (timm's own steps)
        x = ref._pos_embed(ref.patch_embed(pixels)).double().numpy()
    kappa, shifted = np_kappa(x), np_shifted_kappa(x, emb["lambda"])
    assert np.median(kappa) == pytest.approx(emb["kappa"]["median"], rel=1e-5)
    assert np.median(shifted) == pytest.approx(emb["kappa_shifted"]["median"], rel=1e-5)


def _lm(name: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    folder = samples_dir() / name
    auto = AutoModelForCausalLM if name.startswith("gpt2") else AutoModelForMaskedLM
    return auto.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("name", TEXT)
def test_lm_heldout_loss_is_reproduced(name: str) -> None:
    model, tokenizer = _lm(name)
    texts = (samples_dir() / name / "heldout.txt").read_text(encoding="utf-8").splitlines()
    recipe = train_lm.LmRecipe(**meta(name)["training"]["recipe"])
    inputs, labels = train_lm.heldout_batch(tokenizer, texts, recipe)
    with torch.no_grad():
        logits = torch.cat([model(input_ids=inputs[i : i + 32]).logits for i in range(0, len(inputs), 32)])
    logp = torch.log_softmax(logits.double(), -1).numpy()
    lab = labels.numpy()
    if name.startswith("gpt2"):
        logp, lab = logp[:, :-1], lab[:, 1:]
    scored = lab != train_lm.IGNORE
    nll = -np.take_along_axis(logp, np.where(scored, lab, 0)[..., None], -1)[..., 0][scored]
    recorded = meta(name)["heldout"]
    assert recorded["tokens_scored"] == scored.sum() > 1000
    assert float(nll.mean()) == pytest.approx(recorded["value"], rel=1e-5)
    assert recorded["value"] < recorded["uniform_loss"] - 1.0  # it learned something


@pytest.mark.parametrize("name", TEXT)
def test_lm_embedding_kappa_is_reproduced_from_hidden_states(name: str) -> None:
    model, tokenizer = _lm(name)
    emb = meta(name)["embedding"]
    lines = (samples_dir() / name / "heldout.txt").read_text(encoding="utf-8").splitlines()[: emb["samples"]]
    kappa, shifted = [], []
    for line in lines:  # one sample at a time: no padding to strip
        ids = tokenizer(line, truncation=True, max_length=128, return_tensors="pt")
        with torch.no_grad():
            x = model(**ids, output_hidden_states=True).hidden_states[0][0].double().numpy()
        kappa.append(np_kappa(x))
        shifted.append(np_shifted_kappa(x, emb["lambda"]))
    assert np.median(kappa) == pytest.approx(emb["kappa"]["median"], rel=1e-5)
    assert np.median(shifted) == pytest.approx(emb["kappa_shifted"]["median"], rel=1e-5)


def _llama() -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = samples_dir() / LLAMA
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_the_llm_sample_is_a_rope_gqa_decoder_trained_at_its_full_context() -> None:
    config = json.loads((samples_dir() / LLAMA / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_key_value_heads"] < config["num_attention_heads"]  # grouped-query attention
    assert config["max_position_embeddings"] >= 1024
    training = meta(LLAMA)["training"]
    block = training["recipe"]["block"]
    assert block == config["max_position_embeddings"]  # every block as long as the context
    assert training["train_tokens"] == training["train_blocks"] * block
    _, tokenizer = _llama()
    ids = tokenizer("Return the value.")["input_ids"]
    assert ids[0] == config["bos_token_id"] and ids.count(config["bos_token_id"]) == 1  # the BOS, as Llama
    assert tokenizer.model_max_length == block


def _packed(tokenizer: Any, texts: list[str], block: int) -> torch.Tensor:
    """BOS, then block − 1 tokens of the texts joined by EOS: the held-out blocks, packed here anew."""
    stream: list[int] = []
    for text in texts:
        stream += [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
    n = len(stream) // (block - 1)
    body = np.array(stream[: n * (block - 1)]).reshape(n, block - 1)
    return torch.from_numpy(np.concatenate([np.full((n, 1), tokenizer.bos_token_id), body], axis=1))


def test_llm_heldout_loss_is_reproduced() -> None:
    model, tokenizer = _llama()
    texts = (samples_dir() / LLAMA / "heldout.txt").read_text(encoding="utf-8").splitlines()
    blocks = _packed(tokenizer, texts, meta(LLAMA)["training"]["recipe"]["block"])
    nll: list[np.ndarray] = []
    for i in range(0, len(blocks), 2):
        ids = blocks[i : i + 2]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits.double(), -1).numpy()[:, :-1]
        nll.append(-np.take_along_axis(logp, ids[:, 1:, None].numpy(), -1).ravel())
    scored = np.concatenate(nll)
    recorded = meta(LLAMA)["heldout"]
    assert recorded["tokens_scored"] == scored.size > 10_000
    assert float(scored.mean()) == pytest.approx(recorded["value"], rel=1e-5)
    assert recorded["value"] < recorded["uniform_loss"] - 1.0  # it learned something


def _median(values: list[float]) -> float | str:
    m = float(np.median(values))
    return "inf" if np.isinf(m) else m


def test_llm_embedding_kappa_is_reproduced_from_hidden_states() -> None:
    """X of a RoPE decoder is the token lookup: κ(X) is inf wherever a token repeats; κ over the distinct rows
    is recorded beside it."""
    model, tokenizer = _llama()
    emb = meta(LLAMA)["embedding"]
    lines = (samples_dir() / LLAMA / "heldout.txt").read_text(encoding="utf-8").splitlines()[: emb["samples"]]
    kappa, distinct, shifted, repeated = [], [], [], 0
    for line in lines:
        ids = tokenizer(line, truncation=True, max_length=1024, return_tensors="pt")
        with torch.no_grad():
            x = model(**ids, output_hidden_states=True).hidden_states[0][0].double().numpy()
        rows = np.unique(x, axis=0)
        repeated += len(rows) < len(x)
        kappa.append(float(np_kappa(x)) if len(rows) >= min(x.shape) else np.inf)
        distinct.append(float(np_kappa(rows)))
        shifted.append(float(np_shifted_kappa(x, emb["lambda"])))
    assert repeated == emb["samples_with_repeated_rows"] > 0
    for key, values in (("kappa", kappa), ("kappa_distinct", distinct), ("kappa_shifted", shifted)):
        got, recorded = _median(values), emb[key]["median"]
        assert got == recorded if isinstance(recorded, str) else got == pytest.approx(recorded, rel=1e-5), key


def test_the_llm_prompts_ship_beside_it_and_repeat_tokens() -> None:
    _, tokenizer = _llama()
    prompts = (samples_dir() / LLAMA / "prompts.txt").read_text(encoding="utf-8").splitlines()
    assert len(prompts) >= 3 and meta(LLAMA)["data"]["prompts_file"] == "prompts.txt"
    for line in prompts:
        ids = tokenizer(line)["input_ids"]
        assert line.count(". ") >= 1 and 30 < len(ids) < 1024  # several sentences, inside the context
        assert len(set(ids)) < len(ids)  # a token repeats: κ(X) = inf, κ_distinct is the number to read


def test_text_names_a_file_of_a_shipped_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--text SAMPLE/FILE` from an empty folder reads the installed sample's file; a file here wins."""
    from condcli.errors import InputError
    from condcli.inputs.reading import text_source

    monkeypatch.chdir(tmp_path)
    source = text_source(Path(f"{LLAMA}/prompts.txt"))
    assert source.path == samples_dir() / LLAMA / "prompts.txt" and "shipped samples" in source.label
    for missing in (f"{LLAMA}/nothing.txt", "no-such-sample/prompts.txt", f"{LLAMA}/../{LLAMA}/prompts.txt"):
        with pytest.raises(InputError, match="no such file"):
            text_source(Path(missing))
    (tmp_path / LLAMA).mkdir()
    (tmp_path / LLAMA / "prompts.txt").write_text("mine\n", encoding="utf-8")
    assert text_source(Path(f"{LLAMA}/prompts.txt")).path == Path(f"{LLAMA}/prompts.txt")


def test_spectrum_runs_on_the_llm_sample_and_its_prompts_from_an_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from condcli.cli import app

    monkeypatch.chdir(tmp_path)
    argv = ["spectrum", LLAMA, "--text", f"{LLAMA}/prompts.txt", "--no-conditioned", "--json"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    prompts = (samples_dir() / LLAMA / "prompts.txt").read_text(encoding="utf-8").splitlines()
    assert (
        report["inputs"]["count"] == len(prompts)
        and f"{LLAMA}/prompts.txt" in report["inputs"]["description"]
    )
    assert list(tmp_path.iterdir()) == []  # nothing written here


def test_the_readme_states_what_the_vit_pair_shows() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    plain, cond = meta("vit-plain"), meta("vit-conditioned")
    lam = cond["conditioning"]["lambda"]
    assert f"trained without and with X + {lam:g}·I_k" in readme
    assert f"{plain['training']['steps']} steps on 2 CPU cores" in readme
    said = f"accuracy {plain['heldout']['value']:.1%} plain, {cond['heldout']['value']:.1%} conditioned"
    assert said in readme
    assert ("it did not" in readme) == (cond["heldout"]["value"] <= plain["heldout"]["value"])


def test_readme_records_the_vit_results() -> None:
    readme = (ROOT / "docs" / "commands" / "models.md").read_text(encoding="utf-8")
    for name in ("vit-plain", "vit-conditioned"):
        m = meta(name)
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, f"README has no results row for {name}"
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == f"{m['heldout']['value']:.1%}"
        assert cells[2] == f"{m['heldout']['loss']:.3f}"
        assert cells[3] == f"{m['embedding']['kappa']['median']:.3g}"
        assert cells[4] == f"{m['embedding']['kappa_shifted']['median']:.3g}"
    plain, cond = meta("vit-plain"), meta("vit-conditioned")
    curve_p, curve_c = plain["training"]["train_loss_per_epoch"], cond["training"]["train_loss_per_epoch"]
    assert all(c < p for p, c in zip(curve_p, curve_c, strict=True))
    assert "a training loss ahead of the plain one in every epoch" in readme
    assert f"({curve_c[-1]:.2f} vs {curve_p[-1]:.2f} in the last)" in readme
    assert f"({plain['training']['steps']} steps on 2 CPU cores)" in readme
    points = round(100 * (cond["heldout"]["value"] - plain["heldout"]["value"]))
    assert points > 0 and f"{points} points higher" in readme
    total = sum(p.stat().st_size for name in SHIPPED for p in (samples_dir() / name).iterdir())
    assert f"`condcli/sample_checkpoints/` ({total / 1e6:.0f} MB)" in readme
    for name in TEXT:
        m = meta(name)
        assert f"{m['heldout']['value']:.3f} nats/token" in readme
        assert (
            f"{m['heldout']['perplexity']:.0f})" in readme
            or f"perplexity {m['heldout']['perplexity']:.0f}" in readme
        )
        assert f"{m['embedding']['kappa']['median']:.3g}" in readme
    llama = meta(LLAMA)
    assert (
        f"{llama['heldout']['value']:.3f} nats/token (perplexity {llama['heldout']['perplexity']:.0f})"
        in readme
    )
    emb = llama["embedding"]
    assert f"{emb['samples_with_repeated_rows']} of the {emb['samples']}" in readme
    assert f"distinct rows has median {emb['kappa_distinct']['median']:.3g}" in readme
    assert re.search(r"make samples", readme)
