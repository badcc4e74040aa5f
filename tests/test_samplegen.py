"""The code that makes the samples (``make samples``): data, corpus, tokenizers, and a tiny end-to-end build
that must be deterministic, loadable by condcli and written atomically.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from condcli.loading.sources import LoadOptions, load
from samplegen import build, lambda_study, shapes, train_llama, train_lm, train_vit
from samplegen.corpus import Corpus, stdlib_corpus
from samplegen.text_tokenizers import byte_level_bpe, wordpiece

TINY_VIT = train_vit.VitRecipe(embed_dim=32, depth=2, num_heads=2, train_size=256, heldout_size=100, epochs=1)
TINY_LM = {"vocab_size": 300, "hidden": 32, "layers": 2, "heads": 2, "intermediate": 64, "epochs": 1}
TINY_LLAMA = train_llama.LlamaRecipe(
    vocab_size=300, hidden=32, layers=2, heads=2, kv_heads=1, intermediate=64, block=64, epochs=1
)


def quiet(line: str) -> None:
    pass


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    full = stdlib_corpus()
    return Corpus(full.train[:200], full.heldout[:30], full.sha256, full.root)


def test_shapes_are_deterministic_balanced_and_label_the_form_only() -> None:
    a, la = shapes.make_shapes(200, seed=5)
    b, lb = shapes.make_shapes(200, seed=5)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert a.shape == (200, 32, 32, 3) and a.dtype == np.uint8
    assert np.bincount(la).tolist() == [20] * len(shapes.CLASSES)
    c, _ = shapes.make_shapes(200, seed=6)
    assert not np.array_equal(a, c)
    # colour carries no label: the mean colour per class is close to the overall mean
    means = np.stack([a[la == k].mean((0, 1, 2)) for k in range(len(shapes.CLASSES))])
    assert np.abs(means - a.mean((0, 1, 2))).max() < 40
    x = shapes.normalise(a[:3])
    expected = (a[:3].astype(np.float32).transpose(0, 3, 1, 2) / 255.0 - 0.5) / 0.25
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def test_corpus_parses_without_importing_and_splits_stably(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (lib / "pkg").mkdir(parents=True)
    (lib / "test").mkdir()
    long = "This docstring is long enough to be kept in the corpus, "
    (lib / "pkg" / "mod.py").write_text(
        f'"""{long}module."""\nraise SystemExit("never imported")\n'
        f'def f():\n    """{long}\n\n    with   extra   spaces."""\n'
        f'class C:\n    """{long}module."""\n'  # a duplicate: kept once
        'def g():\n    """short"""\n'
    )
    (lib / "test" / "test_x.py").write_text(f'"""{long}in a test folder."""\n')
    (lib / "broken.py").write_text("def (:\n")
    c = stdlib_corpus(lib)
    texts = sorted(c.train + c.heldout)
    assert texts == sorted([f"{long}module.", f"{long}with extra spaces."])
    assert stdlib_corpus(lib) == c


def test_tokenizers_round_trip_through_save_pretrained(tmp_path: Path, corpus: Corpus) -> None:
    from transformers import AutoTokenizer

    for make, name in ((byte_level_bpe, "bpe"), (wordpiece, "wp")):
        tok = make(corpus.train, 300)
        tok.save_pretrained(tmp_path / name)
        again = AutoTokenizer.from_pretrained(tmp_path / name)
        assert again(corpus.heldout[0])["input_ids"] == tok(corpus.heldout[0])["input_ids"]
        assert again.padding_side == "right" and again.model_max_length == 128
    bert = wordpiece(corpus.train, 300)
    ids = bert("Return the value.")["input_ids"]
    assert ids[0] == bert.cls_token_id and ids[-1] == bert.sep_token_id


def test_packing_and_masking(corpus: Corpus) -> None:
    gpt, bert = byte_level_bpe(corpus.train, 300), wordpiece(corpus.train, 300)
    blocks = train_lm.pack(gpt, corpus.train[:50], "gpt2")
    assert blocks.shape[1] == 128 and (blocks == gpt.eos_token_id).any()
    blocks = train_lm.pack(bert, corpus.train[:50], "bert")
    assert (blocks[:, 0] == bert.cls_token_id).all() and (blocks[:, -1] == bert.sep_token_id).all()
    recipe = train_lm.LmRecipe(kind="bert")
    inputs, labels = train_lm.heldout_batch(bert, corpus.train[:50], recipe)
    again, labels2 = train_lm.heldout_batch(bert, corpus.train[:50], recipe)
    assert (inputs == again).all() and (labels == labels2).all()  # the held-out masks are fixed
    scored = labels != train_lm.IGNORE
    assert 0.10 < float(scored.double().mean()) < 0.20
    assert not scored[:, 0].any() and not scored[:, -1].any()  # [CLS]/[SEP] are never scored
    assert (labels[scored] == blocks[scored]).all()
    assert float((inputs[scored] == bert.mask_token_id).double().mean()) == pytest.approx(0.8, abs=0.06)


def test_a_tiny_vit_build_is_deterministic_and_loads(tmp_path: Path) -> None:
    recipe = train_vit.VitRecipe(**{**TINY_VIT.__dict__, "lam": 10.0})
    first = build.build_vit("tiny", recipe, tmp_path / "a", quiet)
    second = build.build_vit("tiny", recipe, tmp_path / "b", quiet)
    assert sha(tmp_path / "a" / "tiny" / "model.safetensors") == sha(
        tmp_path / "b" / "tiny" / "model.safetensors"
    )
    assert first["heldout"] == second["heldout"]
    written = json.loads((tmp_path / "a" / "tiny" / "metadata.json").read_text())
    assert written["conditioning"] == {"lambda": 10.0, "mode": "shift", "at": "pos_drop"}
    loaded = load(str(tmp_path / "a" / "tiny"), LoadOptions(device="cpu"))
    assert loaded.adapter.builtin is not None and loaded.preprocessing.image_size == (32, 32)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["tiny"]  # no partial folder left


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_a_tiny_lm_build_loads_with_its_tokenizer(
    tmp_path: Path, corpus: Corpus, kind: train_lm.Kind
) -> None:
    meta = build.build_lm("tiny", train_lm.LmRecipe(kind=kind, **TINY_LM), corpus, tmp_path, quiet)
    assert meta["heldout"]["metric"] == "loss (nats/token)" and meta["heldout"]["tokens_scored"] > 0
    assert 0 < meta["heldout"]["value"] < 2 * meta["heldout"]["uniform_loss"]
    loaded = load(str(tmp_path / "tiny"), LoadOptions(device="cpu"))
    assert loaded.family == ("hf-gpt2" if kind == "gpt2" else "hf-bert")
    assert loaded.preprocessing.tokenizer is not None
    assert (tmp_path / "tiny" / "heldout.txt").read_text().splitlines() == corpus.heldout


def test_llama_blocks_start_with_the_bos_and_hold_the_docstrings_in_order(corpus: Corpus) -> None:
    tok = train_llama.tokenizer(corpus.train, TINY_LLAMA)
    bos = tok.bos_token_id
    assert tok("Return the value.")["input_ids"][0] == bos  # the tokenizer adds the BOS, as Llama's do
    assert bos not in tok("Return the value.", add_special_tokens=False)["input_ids"]
    blocks = train_llama.pack(tok, corpus.train[:40], 64)
    assert blocks.shape[1] == 64 and (blocks[:, 0] == bos).all()
    stream = [
        i for text in corpus.train[:40] for i in [*tok(text, add_special_tokens=False)["input_ids"], bos]
    ]
    assert blocks[:, 1:].reshape(-1).tolist() == stream[: blocks.shape[0] * 63]  # nothing dropped inside


def test_a_tiny_llama_build_loads_with_its_tokenizer_and_prompts(tmp_path: Path, corpus: Corpus) -> None:
    meta = build.build_llama("tiny", TINY_LLAMA, corpus, tmp_path, quiet)
    assert (
        meta["heldout"]["tokens_scored"] > 0
        and 0 < meta["heldout"]["value"] < meta["heldout"]["uniform_loss"]
    )
    assert meta["training"]["train_tokens"] == meta["training"]["train_blocks"] * 64
    folder = tmp_path / "tiny"
    loaded = load(str(folder), LoadOptions(device="cpu"))
    assert loaded.family == "generic" and loaded.preprocessing.tokenizer is not None
    config = json.loads((folder / "config.json").read_text())
    assert config["num_key_value_heads"] == 1 and config["max_position_embeddings"] == 64
    assert (folder / "prompts.txt").read_text().splitlines() == list(build.PROMPTS)
    assert (folder / "heldout.txt").read_text().splitlines() == corpus.heldout
    emb = meta["embedding"]  # a token lookup: docstrings that repeat a token have an exactly singular X
    assert emb["samples_with_repeated_rows"] > 0 and isinstance(emb["kappa_distinct"]["median"], float)


def test_lambda_study_orders_the_main_comparison_first_and_summarises() -> None:
    runs = lambda_study.order([0.0, 1.0, 3.0, 10.0, 12.0], [0, 1, 2])
    assert runs[:9] == [(lam, s) for s in (0, 1, 2) for lam in (0.0, 12.0, 10.0)]
    assert sorted(runs) == sorted((lam, s) for lam in (0.0, 1.0, 3.0, 10.0, 12.0) for s in (0, 1, 2))
    summary = lambda_study.summarise(
        {
            "a": {"lambda": 0.0, "seed": 1, "accuracy": 0.8},
            "b": {"lambda": 0.0, "seed": 0, "accuracy": 0.7},
            "c": {"lambda": 12.0, "seed": 0, "accuracy": 0.5},
        }
    )
    assert list(summary) == ["0", "12"]
    assert summary["0"]["accuracy"] == [0.7, 0.8] and summary["0"]["seeds"] == [0, 1]
    assert summary["0"]["mean"] == pytest.approx(0.75) and summary["0"]["spread"] == pytest.approx(0.1)
    assert summary["0"]["std"] == pytest.approx(np.std([0.7, 0.8], ddof=1))
    assert summary["12"]["std"] is None


def test_the_lambda_study_results_agree_with_the_samples_and_the_pages() -> None:
    """samplegen/lambda_study.json: its summary is its runs', a run taken from a shipped sample is that
    sample, and the table in docs/samples.md and the samples' README is the one the results give."""
    from samplegen.lambda_figure import table

    root = Path(__file__).resolve().parent.parent
    data = lambda_study.load_results(lambda_study.RESULTS)
    assert data["runs"] and data["summary"] == lambda_study.summarise(data["runs"])
    plan = data["planned"]
    keys = {f"lambda={lam:g} seed={s}" for lam, s in lambda_study.order(plan["lambdas"], plan["seeds"])}
    assert set(data["missing"]) == keys - set(data["runs"]) and set(data["runs"]) <= keys
    base = train_vit.VitRecipe()
    assert data["recipe"] == {**base.__dict__, "lam": "varied", "seed": "varied"}
    shipped = {run["shipped_as"]: run for run in data["runs"].values() if "shipped_as" in run}
    assert {n: r["lambda"] for n, r in shipped.items()} == {n: lam for lam, n in lambda_study.SHIPPED.items()}
    for run in data["runs"].values():
        if "shipped_as" in run:  # a shipped sample is its run: the same recipe, accuracy and weights
            name = run["shipped_as"]
            meta = json.loads((build.ROOT / name / "metadata.json").read_text())
            assert run["seed"] == 0 and meta["heldout"]["value"] == run["accuracy"]
            assert meta["training"]["recipe"]["lam"] == (None if run["lambda"] == 0 else run["lambda"])
            assert sha(build.ROOT / name / "model.safetensors") == run["weights_sha256"]
    shown = table(data)
    for page in (root / "docs" / "samples.md", build.ROOT / "README.md"):
        assert shown in page.read_text(encoding="utf-8"), page


def test_a_failed_build_leaves_the_old_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build.build_vit("tiny", TINY_VIT, tmp_path, quiet)
    before = sha(tmp_path / "tiny" / "model.safetensors")

    def fail(*args: object) -> None:  # fails after the new weights were written into the temporary folder
        raise RuntimeError("stopped")

    monkeypatch.setattr(build, "embedding_kappa", fail)
    with pytest.raises(RuntimeError):
        build.build_vit("tiny", train_vit.VitRecipe(**{**TINY_VIT.__dict__, "seed": 1}), tmp_path, quiet)
    assert sha(tmp_path / "tiny" / "model.safetensors") == before
    assert [p.name for p in tmp_path.iterdir()] == ["tiny"]


def test_wordpiece_vocabulary_is_the_same_in_every_process(tmp_path: Path, corpus: Corpus) -> None:
    """The tokenizers trainer iterates hash maps seeded per process; the vocabulary must not depend on it."""
    import subprocess
    import sys

    (tmp_path / "texts.json").write_text(json.dumps(corpus.train))
    code = (
        "import json, sys; from samplegen.text_tokenizers import wordpiece;"
        f"t = wordpiece(json.load(open({str(tmp_path / 'texts.json')!r})), 400);"
        "print(json.dumps(sorted(t.get_vocab().items())))"
    )
    root = Path(__file__).resolve().parent.parent
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2] and len(json.loads(runs[0])) == 400
