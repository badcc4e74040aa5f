"""``make samples``: train every sample checkpoint on CPU and write its folder.

Each folder is written beside its target and swapped in only when complete. Before the swap the folder is
loaded back through condcli's normal sources and evaluated again: the held-out metric recorded in
metadata.json is the one the shipped weights give. At the end a table compares each weights file with the
one it replaced, so a rebuild shows whether it was bit-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from condcli.inputs.batches import Batch, InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from samplegen import shapes, train_llama, train_lm, train_vit
from samplegen.common import THREADS, atomic_folder, versions, write_metadata
from samplegen.corpus import Corpus, stdlib_corpus
from samplegen.measure import embedding_kappa
from samplegen.text_tokenizers import MAX_LENGTH, byte_level_bpe, wordpiece

ROOT = Path(__file__).resolve().parent.parent / "condcli" / "sample_checkpoints"
WEIGHTS = "model.safetensors"
KAPPA_IMAGES = 256  # κ(X) is measured on the first 256 held-out images
KAPPA_TEXTS = 64  # … and the first 64 held-out docstrings
MADE_BY = "make samples (python -m samplegen.build)"
# vit-conditioned's λ: the one the λ study supports (samplegen/lambda_study.json, docs/samples.md): λ = 1 had
# the highest held-out accuracy of every λ tried, above the plain recipe at each of 3 seeds
CONDITIONED_LAMBDA = 1.0


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _common(name: str, description: str, seed: int) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "seed": seed,
        "made_by": MADE_BY,
        "threads": THREADS,
        "versions": versions(),
    }


def build_vit(
    name: str, recipe: train_vit.VitRecipe, out: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    lam = recipe.lam
    px, py, digest = train_vit.heldout(recipe)
    model, info = train_vit.train(recipe, (px, py), log)
    kind = "plain" if lam is None else f"conditioned tokens (X + {lam:g}·I_k after positional encoding)"
    meta = _common(name, f"small timm ViT on shapes10, {kind}", recipe.seed)
    meta |= {
        "architecture": f"timm VisionTransformer: 32×32 px, patch 4, d {recipe.embed_dim}, "
        f"{recipe.depth} layers, {recipe.num_heads} heads",
        "task": f"shapes10 classification ({len(shapes.CLASSES)} classes, procedurally generated)",
        "conditioning": None if lam is None else {"lambda": lam, "mode": "shift", "at": "pos_drop"},
        "data": {
            "generator": "samplegen.shapes.make_shapes",
            "train": {
                "count": recipe.train_size,
                "seed": recipe.train_seed,
                "sha256": info["train"]["sha256"],
            },
            "heldout": {"count": recipe.heldout_size, "seed": recipe.heldout_seed, "sha256": digest},
        },
        "training": {k: info[k] for k in ("recipe", "steps", "train_loss_per_epoch", "seconds")}
        | {
            "optimizer": "AdamW (betas 0.9, 0.98), decay on matrices only",
            "schedule": f"linear warm-up {recipe.warmup_steps} steps, cosine to 0",
        },
    }
    with atomic_folder(out / name) as tmp:
        train_vit.save(model, tmp)
        write_metadata(tmp, meta)  # first without results: loading reads the conditioning from it
        loaded = load(str(tmp), LoadOptions(device="cpu"))
        scores = train_vit.evaluate(loaded.model, px, py)
        if scores != info["heldout_in_memory"]:
            raise RuntimeError(
                f"{name}: the saved weights give {scores}, training ended at {info['heldout_in_memory']}"
            )
        meta["heldout"] = {
            "metric": "accuracy",
            "value": scores["accuracy"],
            "loss": scores["loss"],
            "count": recipe.heldout_size,
        }
        batch = Batch(
            {"pixel_values": px[:KAPPA_IMAGES]}, None, [f"heldout-{i}" for i in range(KAPPA_IMAGES)]
        )
        meta["embedding"] = embedding_kappa(loaded, batch, f"the first {KAPPA_IMAGES} held-out images")
        write_metadata(tmp, meta)
    return meta


def build_lm(
    name: str, recipe: train_lm.LmRecipe, corpus: Corpus, out: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    kind = recipe.kind
    tokenizer = (byte_level_bpe if kind == "gpt2" else wordpiece)(corpus.train, recipe.vocab_size)
    model, info = train_lm.train(recipe, tokenizer, corpus.train, log)
    in_memory = train_lm.evaluate(model, *train_lm.heldout_batch(tokenizer, corpus.heldout, recipe), kind)
    what = "causal LM (next-token loss)" if kind == "gpt2" else "masked LM (15% masked-token loss)"
    meta = _common(
        name,
        f"small {'GPT-2' if kind == 'gpt2' else 'BERT'} on Python stdlib docstrings, {what}",
        recipe.seed,
    )
    meta |= {
        "architecture": f"HF {'GPT-2' if kind == 'gpt2' else 'BERT'}: d {recipe.hidden}, "
        f"{recipe.layers} layers, "
        f"{recipe.heads} heads, vocab {len(tokenizer)}, {MAX_LENGTH} positions",
        "task": f"{what} on Python {versions()['python']} stdlib docstrings",
        "conditioning": None,
        "data": {
            "corpus": "samplegen.corpus.stdlib_corpus",
            "sha256": corpus.sha256,
            "train_docstrings": len(corpus.train),
            "heldout_docstrings": len(corpus.heldout),
            "heldout_file": "heldout.txt",
            "tokenizer": "byte-level BPE" if kind == "gpt2" else "WordPiece",
        },
        "training": {
            k: info[k]
            for k in ("recipe", "steps", "train_blocks", "train_tokens", "train_loss_per_epoch", "seconds")
        }
        | {
            "optimizer": "AdamW (betas 0.9, 0.98), decay on matrices only",
            "schedule": f"linear warm-up {recipe.warmup_steps} steps, cosine to 0",
        },
    }
    hf: Any = model  # transformers' save_pretrained is untyped
    with atomic_folder(out / name) as tmp:
        hf.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "heldout.txt").write_text("\n".join(corpus.heldout) + "\n", encoding="utf-8")
        write_metadata(tmp, meta)
        auto = AutoModelForCausalLM if kind == "gpt2" else AutoModelForMaskedLM
        texts = (tmp / "heldout.txt").read_text(encoding="utf-8").splitlines()
        reloaded_tok = AutoTokenizer.from_pretrained(tmp)
        scores = train_lm.evaluate(
            auto.from_pretrained(tmp), *train_lm.heldout_batch(reloaded_tok, texts, recipe), kind
        )
        if scores != in_memory:
            raise RuntimeError(f"{name}: the saved weights give {scores}, training ended at {in_memory}")
        meta["heldout"] = {
            "metric": "loss (nats/token)",
            "value": scores["loss"],
            "perplexity": scores["perplexity"],
            "tokens_scored": scores["tokens_scored"],
            "uniform_loss": float(torch.log(torch.tensor(float(len(tokenizer))))),
        }
        loaded = load(str(tmp), LoadOptions(device="cpu"))
        spec = InputSpec(text=tmp / "heldout.txt", max_samples=KAPPA_TEXTS, batch_size=KAPPA_TEXTS)
        batch = next(iter(stream(loaded.preprocessing, spec)))
        meta["embedding"] = embedding_kappa(loaded, batch, f"the first {KAPPA_TEXTS} held-out docstrings")
        write_metadata(tmp, meta)
    return meta


# realistic docstring-like prompts written for the sample (not lines of its corpus); each repeats tokens
PROMPTS = (
    "Return the value of the key if the key is in the dictionary, else the default value. If the default "
    "value is not given, it is None, so this method never raises a KeyError.",
    "Open the file and return a file object. The file is opened in text mode unless the mode says "
    "otherwise, and in text mode the encoding is the default encoding of the platform. Raise OSError if "
    "the file cannot be opened.",
    "Read up to size bytes from the stream and return them. If size is negative or omitted, read until the "
    "end of the stream. Fewer bytes than requested may be returned, and an empty bytes object means the "
    "end of the stream.",
    "Split the string at the first occurrence of the separator, and return a tuple of the part before the "
    "separator, the separator itself, and the part after it. If the separator is not found, return the "
    "string itself and two empty strings.",
)


def build_llama(
    name: str, recipe: train_llama.LlamaRecipe, corpus: Corpus, out: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = train_llama.tokenizer(corpus.train, recipe)
    model, info = train_llama.train(recipe, tokenizer, corpus.train, log)
    in_memory = train_llama.evaluate(model, train_llama.pack(tokenizer, corpus.heldout, recipe.block))
    meta = _common(name, "small Llama-style decoder on Python stdlib docstrings, causal LM", recipe.seed)
    meta |= {
        "architecture": f"HF Llama: d {recipe.hidden}, {recipe.layers} layers, {recipe.heads} heads "
        f"({recipe.kv_heads} KV), RoPE, vocab {len(tokenizer)}, {recipe.block} positions",
        "task": f"causal LM (next-token loss) on Python {versions()['python']} stdlib docstrings",
        "conditioning": None,
        "data": {
            "corpus": "samplegen.corpus.stdlib_corpus",
            "sha256": corpus.sha256,
            "train_docstrings": len(corpus.train),
            "heldout_docstrings": len(corpus.heldout),
            "heldout_file": "heldout.txt",
            "prompts_file": "prompts.txt",
            "tokenizer": "byte-level BPE (gpt2-docstrings'), BOS added",
        },
        "training": {
            k: info[k]
            for k in ("recipe", "steps", "train_blocks", "train_tokens", "train_loss_per_epoch", "seconds")
        }
        | {
            "optimizer": "AdamW (betas 0.9, 0.98), decay on matrices only",
            "schedule": f"linear warm-up {recipe.warmup_steps} steps, cosine to 0",
        },
    }
    hf: Any = model  # transformers' save_pretrained is untyped
    with atomic_folder(out / name) as tmp:
        hf.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "heldout.txt").write_text("\n".join(corpus.heldout) + "\n", encoding="utf-8")
        (tmp / "prompts.txt").write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
        write_metadata(tmp, meta)
        texts = (tmp / "heldout.txt").read_text(encoding="utf-8").splitlines()
        reloaded_tok = AutoTokenizer.from_pretrained(tmp)
        scores = train_llama.evaluate(
            AutoModelForCausalLM.from_pretrained(tmp), train_llama.pack(reloaded_tok, texts, recipe.block)
        )
        if scores != in_memory:
            raise RuntimeError(f"{name}: the saved weights give {scores}, training ended at {in_memory}")
        meta["heldout"] = {
            "metric": "loss (nats/token)",
            "value": scores["loss"],
            "perplexity": scores["perplexity"],
            "tokens_scored": scores["tokens_scored"],
            "uniform_loss": float(torch.log(torch.tensor(float(len(tokenizer))))),
        }
        loaded = load(str(tmp), LoadOptions(device="cpu"))
        spec = InputSpec(text=tmp / "heldout.txt", max_samples=KAPPA_TEXTS, batch_size=KAPPA_TEXTS)
        batch = next(iter(stream(loaded.preprocessing, spec)))
        meta["embedding"] = embedding_kappa(loaded, batch, f"the first {KAPPA_TEXTS} held-out docstrings")
        write_metadata(tmp, meta)
    return meta


def _median(emb: dict[str, Any], key: str) -> str:
    value = emb[key]["median"]
    shown = f"{value:.3g}" if isinstance(value, float) else str(value)
    return shown + (
        f" (distinct rows {emb['kappa_distinct']['median']:.3g})"
        if key == "kappa" and "kappa_distinct" in emb
        else ""
    )


SAMPLES = ("vit-plain", "vit-conditioned", "gpt2-docstrings", "bert-docstrings", "llama-docstrings")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m samplegen.build", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="where the sample folders go")
    parser.add_argument("--only", nargs="+", choices=SAMPLES, default=list(SAMPLES), help="build only these")
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # packing tokenizes whole docstrings on purpose; no length warnings
    hf_logging.disable_progress_bar()

    def log(line: str) -> None:
        print(line, flush=True)

    before = {name: _sha(args.out / name / WEIGHTS) for name in args.only}
    corpus = stdlib_corpus() if any(n.endswith("docstrings") for n in args.only) else None
    results, start = {}, time.perf_counter()
    for name in args.only:
        log(f"{name}: training")
        t = time.perf_counter()
        if name.startswith("vit-"):
            recipe = train_vit.VitRecipe(lam=None if name == "vit-plain" else CONDITIONED_LAMBDA)
            results[name] = build_vit(name, recipe, args.out, log)
        elif name.startswith("llama"):
            assert corpus is not None
            results[name] = build_llama(name, train_llama.LlamaRecipe(), corpus, args.out, log)
        else:
            assert corpus is not None
            lm = train_lm.LmRecipe(kind="gpt2" if name.startswith("gpt2") else "bert")
            results[name] = build_lm(name, lm, corpus, args.out, log)
        log(f"{name}: done in {time.perf_counter() - t:.0f} s")
    log(f"\nall built in {time.perf_counter() - start:.0f} s\n")
    log("| sample | held-out | κ(X) median | κ(X + 10·I_k) median | weights vs previous build |")
    log("|---|---|---|---|---|")
    for name, meta in results.items():
        held, emb = meta["heldout"], meta["embedding"]
        value = (
            f"{held['value']:.1%} accuracy"
            if held["metric"] == "accuracy"
            else f"{held['value']:.3f} nats/token"
        )
        now = _sha(args.out / name / WEIGHTS)
        same = "first build" if before[name] is None else ("identical" if now == before[name] else "changed")
        log(f"| {name} | {value} | {_median(emb, 'kappa')} | {_median(emb, 'kappa_shifted')} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
