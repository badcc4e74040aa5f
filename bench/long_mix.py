"""`bench_long_sequence --mix`: κ(P) of causal attention at forward speed (issue 43), on a model whose heads
are not all floors.

Workload: the sample RoPE/GQA LLM ``condcli/sample_checkpoints/llama-docstrings`` on its held-out text where
it is present (its context is 1,024 tokens: at 2,048 RoPE runs past it, as it does for any prompt), else
the bench's random-init Llama (:func:`bench.bench_long_sequence.build`) given a realistic attention
temperature: query head h of every layer has its W_Q scaled by 10^(−2.5 + 4h/(H−1)), from broad heads
(near-uniform causal averaging: P is well resolved, κ ≈ 1e3) to sharp ones (floors), and head 0 of every
layer is made an attention sink on the prompt's first token (the construction of tests/sinking.py: a
constant query along RoPE's slowest pair, and a key there that only the first token has), on random token
ids. At each prompt length, side by side and interleaved:

  (a) the model's own forward (sdpa);
  (f) its eager forward returning every attention (``output_attentions=True``);
  (e) ``spectrum --no-conditioned``, every layer;
  (g) (e) with the model's constants (κ of the whole projections, κ(E)) computed after the forward rather
      than beside it (condcli/analysis/meanwhile.py);

and the share of heads whose κ(P) the Lanczos brackets decided (O(n²) a step) against those that went to
an SVD (:func:`condcli.spectra.causal.counts`). Targets: (e) ≤ 3× (f) at 2,048 tokens, (e) ≤ 1.5× (a) at
512, and (e)'s peak memory ≤ (f)'s at the longest prompt.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.bench_spectrum import Verdict, forward, ratio
from condcli.analysis.meanwhile import after_the_forward
from condcli.inputs.batches import Batch
from condcli.loading.samples import samples_dir
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.spectra import causal

SAMPLE = "llama-docstrings"
LOW, HIGH = -2.5, 1.5  # log10 of the W_Q scale of the first and the last query head


def mixed_model(shape: Any, folder: Path, *, tempered: bool = False) -> tuple[LoadedModel, str]:
    """The sample LLM where present (unless ``tempered``), else the random-init Llama with a realistic
    attention temperature, and a line that says which."""
    from bench.bench_long_sequence import build

    sample = samples_dir() / SAMPLE
    if (sample / "config.json").exists() and not tempered:
        return load(str(sample), LoadOptions(device="cpu")), f"the sample {SAMPLE}"
    loaded = build(shape, folder, "cpu", bias=True)
    temper(loaded.model, shape.heads)
    what = (
        f"random-init Llama, W_Q of query head h scaled by 10^({LOW} + {HIGH - LOW:g}h/(H−1)), "
        "head 0 of every layer a sink on the first token"
    )
    return loaded, what


def temper(model: torch.nn.Module, heads: int) -> None:
    """Scale each query head's W_Q (broad to sharp) and make head 0 of every layer a sink on token ids
    :func:`first_token` (the prompt's first token)."""
    scales = torch.logspace(LOW, HIGH, heads)
    config: Any = model.config
    d = int(config.hidden_size)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight  # type: ignore[operator]
        emb[:, 0] = 0
        emb[FIRST] = 0
        emb[FIRST, 0] = 1.0  # after the RMSNorm: √d·e_0, and no other token has a component on e_0
        for layer in model.layers:  # type: ignore[union-attr]
            attn = layer.self_attn
            hd = int(attn.head_dim)
            dim = hd // 2 - 1  # RoPE's slowest pair: it turns by well under a radian over the prompt
            for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
                proj.bias.zero_()
            attn.q_proj.weight.mul_(scales.repeat_interleave(hd)[:, None])
            attn.q_proj.weight[:hd] = 0  # head 0: a constant query, 5 along dim
            attn.q_proj.bias[dim] = 5.0
            attn.k_proj.weight[dim] = 0
            attn.k_proj.weight[dim, 0] = 2.0 / math.sqrt(d) * math.sqrt(hd)  # the first token's logit: 10


FIRST = 1  # the token id every mixed prompt starts with (the sink's key)


def mixed_prompt(loaded: LoadedModel, tokens: int) -> Batch:
    """The sample's held-out text (docstrings it was not trained on) cut to ``tokens`` tokens where the sample
    is present; else ``tokens`` random ids (seed 0) after :data:`FIRST`, which occurs only there. No
    padding."""
    folder = samples_dir() / SAMPLE
    if Path(loaded.spec) == folder and (folder / "heldout.txt").exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
        ids = torch.tensor([tokenizer((folder / "heldout.txt").read_text())["input_ids"][:tokens]])
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        return Batch(inputs, None, ["heldout.txt"])
    config: Any = loaded.model.config
    ids = torch.tensor([random_ids(int(config.vocab_size), tokens)])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return Batch(inputs, None, ["random tokens #0"])


def random_ids(vocab: int, tokens: int) -> list[int]:
    """``tokens`` random token ids (seed 0), :data:`FIRST` first and nowhere else."""
    ids = torch.randint(FIRST + 1, vocab, (tokens,), generator=torch.Generator().manual_seed(0))
    ids[0] = FIRST
    out: list[int] = ids.tolist()
    return out


def eager_attentions(loaded: LoadedModel, batch: Batch) -> None:
    """The eager forward returning every layer's attention probabilities."""
    with loaded.adapter.eager_attention(), torch.no_grad():
        loaded.model(**batch.inputs, output_attentions=True)


LABELS = {
    "a": "(a) forward (sdpa)",
    "f": "(f) eager forward returning every attention",
    "e": "(e) spectrum --no-conditioned (all layers)",
    "g": "(g) (e), model constants after the forward",
}
SPECTRA = ("e", "g")  # the contenders that run condcli's spectrum (each counts its heads' κ(P))


def contenders(loaded: LoadedModel, batch: Batch) -> dict[str, Callable[[], object]]:
    from bench.bench_long_sequence import spectrum

    return {
        "a": lambda: forward(loaded, [batch], eager=False),
        "f": lambda: eager_attentions(loaded, batch),
        "e": lambda: spectrum(loaded, batch, None),
        "g": lambda: after(lambda: spectrum(loaded, batch, None)),
    }


def after(run: Callable[[], object]) -> object:
    """``run`` with the model constants (κ of the whole projections, κ(E)) computed after the forward
    rather than beside it (condcli/analysis/meanwhile.py): what the thread beside saves."""
    with after_the_forward():
        return run()


def side_by_side(shape: Any, lengths: list[int], repeats: int, *, tempered: bool = False) -> list[Verdict]:
    """Build, warm up, measure each length; print one table and return the targets' verdicts."""
    from bench.bench_long_sequence import can_reset_peak, measure

    with tempfile.TemporaryDirectory(prefix="condcli-bench-mix-") as folder:
        loaded, what = mixed_model(shape, Path(folder), tempered=tempered)
        params = sum(p.numel() for p in loaded.model.parameters())
        cfg: Any = loaded.model.config
        print(
            f"\n=== cpu: {what}; {params / 1e6:.1f}M parameters (d {cfg.hidden_size}, "
            f"{cfg.num_hidden_layers} layers, {cfg.num_attention_heads} heads / "
            f"{cfg.num_key_value_heads} KV), "
            f"{loaded.dtype} ==="
        )
        memory = can_reset_peak()
        header = (
            f"{'tokens':>6}  {'contender':<44} {'median s':>9} {'vs (a)':>8} {'vs (f)':>8} {'peak +MiB':>10}"
        )
        print(header + "\n" + "-" * len(header))
        verdicts: list[Verdict] = []
        measure(contenders(loaded, mixed_prompt(loaded, 16)), 1, memory=False)  # warm-up: a short prompt
        for tokens in lengths:
            causal.reset_counts()
            times, peaks = measure(contenders(loaded, mixed_prompt(loaded, tokens)), repeats, memory)
            got = causal.counts()
            t = {k: statistics.median(v) for k, v in times.items()}
            for k, label in LABELS.items():
                mem = f"{max(peaks[k]):>10.0f}" if memory else f"{'n/a':>10}"
                vs = f"{t[k] / t['a']:>7.2f}x {t[k] / t['f']:>7.2f}x"
                print(f"{tokens:>6}  {label:<44} {t[k]:>9.2f} {vs} {mem}")
            # every head is settled in O(n²) (by the bounds alone, or by the brackets) but those that went to
            # an SVD; of the heads the maxima needed a value of, the brackets decided ``decided``
            total = int(cfg.num_hidden_layers) * int(cfg.num_attention_heads) * repeats * len(SPECTRA)
            share = 1 - got["svd"] / total if total else math.nan
            print(
                f"{tokens:>6}  heads' κ(P) decided in O(n²): {total - got['svd']} of {total} ({share:.0%}; "
                f"{got['decided']} by the brackets, the rest by bounds alone), by SVD: {got['svd']}"
            )
            if tokens >= 2048:
                verdicts.append(Verdict(f"{tokens} tokens: (e) / (f)", ratio(t["e"], t["f"]), 3.0))
            if tokens <= 512:
                verdicts.append(Verdict(f"{tokens} tokens: (e) / (a)", ratio(t["e"], t["a"]), 1.5))
            if memory and tokens == max(lengths):
                verdicts.append(
                    Verdict(
                        f"{tokens} tokens: peak of (e) / (f)", ratio(max(peaks["e"]), max(peaks["f"])), 1.0
                    )
                )
        return verdicts


def parse_lengths(text: str) -> list[int]:
    """'512,2048' → [512, 2048]."""
    return [int(part) for part in text.split(",") if part.strip()]
