"""`make bench`: the time and memory of `condcli spectrum` on a 2,048-token prompt through a ~100M Llama.

Workload (issue 15): a random-init Llama built from its config the way `condcli spectrum FOLDER --weights
random` builds it (LlamaConfig: d = 768, 12 layers, 12 query heads reading 4 KV heads, MLP 2048, vocab
32000: 100.1M parameters), one prompt of 2,048 random token ids, CPU. P of one layer is then H × 2048²
numbers (192 MiB in float32), so the analysis must stream layer by layer and never hold every layer's P.
  (a) the model's own forward (its default attention, sdpa): what a user's inference costs;
  (b) the same forward with eager attention (what capture needs: P is materialised);
  (c) capture alone: hooks on X, X_l, A_l and P, eager attention, a sink that drops everything;
  (d) `spectrum --layers 0 --no-conditioned`: X and one layer analysed (every layer still runs);
  (e) `spectrum --no-conditioned`: X and every layer (κ, μ, κ(P) by float64 SVD, H(P)).
Time: wall clock of each contender, the median of ``repeats`` interleaved runs (a, b, …, a, b, …); one run
by default: (e) alone is 6 minutes on 2 cores, nearly all of it 144 float64 SVDs of 2048 × 2048 (``--layers
4`` builds a shallower Llama for a quicker run). Memory: the kernel's high-water mark of this process's
resident set (VmHWM), reset to the current RSS before each contender (/proc/self/clear_refs, Linux ≥ 4.0),
minus the RSS at that moment: what the contender added on top of the loaded model and its inputs, every
allocation included (torch, LAPACK workspaces, Python). Memory that grows with depth shows as (e) − (d): a
layer's P kept after its analysis would add at least one P per layer; what remains (≈ 0.1 P per layer,
measured here) is glibc keeping freed heap pages between layers: on a 4-layer Llama (d 256) at 2,048
tokens it went with MALLOC_MMAP_THRESHOLD_=1048576 (289 → 349 MiB for 1 → 4 layers; 280 → 281 MiB).
Every head of this random-init Llama is a floor; ``--mix`` runs the issue-43 workload instead, whose heads
are not (bench/long_mix.py: sdpa, eager returning every attention and spectrum at 512 and 2,048 tokens);
``--whole-process`` adds the same three as whole processes, as the issue measured them
(bench/long_mix_process.py).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from bench import long_mix, long_mix_process
from bench.bench_spectrum import Verdict, forward, machine, print_verdicts, ratio, replay
from condcli.analysis.common import release_memory
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.capture import capture
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadedModel, LoadOptions, load

LAM = 10.0
FROM = "command line"
MIB = 2**20


@dataclass(frozen=True)
class Llama:
    """The model's shape (transformers LlamaConfig fields)."""

    hidden: int = 768  # d
    layers: int = 12
    heads: int = 12  # query heads
    kv_heads: int = 4  # grouped-query attention: each KV head serves 3 query heads
    mlp: int = 2048  # intermediate_size
    vocab: int = 32000
    tokens: int = 2048  # prompt length


TINY = Llama(hidden=64, layers=2, heads=4, kv_heads=2, mlp=128, vocab=1000, tokens=64)


def build(
    shape: Llama, folder: Path, device: str, dtype: str | None = None, *, bias: bool = False
) -> LoadedModel:
    """config.json of a LlamaModel in ``folder``, loaded through condcli (random init, seed 0; ``dtype``:
    the model's own when None; ``bias``: q/k/v/o biases, as ``--mix`` needs for its sink heads)."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.mlp,
        vocab_size=shape.vocab,
        max_position_embeddings=max(shape.tokens, 2048),
        attention_bias=bias,
        architectures=["LlamaModel"],
    )
    config.save_pretrained(folder)
    return load(str(folder), LoadOptions(weights="random", device=device, dtype=dtype, seed=0))


def prompt(shape: Llama, device: torch.device) -> Batch:
    """One prompt of ``shape.tokens`` random token ids (seed 0), no padding."""
    ids = torch.randint(0, shape.vocab, (1, shape.tokens), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids.to(device), "attention_mask": torch.ones_like(ids).to(device)}
    return Batch(inputs, None, ["random tokens #0"])


# ---------------------------------------------------------------- memory


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def can_reset_peak() -> bool:
    """Whether this kernel lets the process reset its own high-water mark (/proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM:") > 0


@contextmanager
def peak_rss(into: list[float]) -> Iterator[None]:
    """Appends the peak RSS above the RSS at entry (MiB) once the block ends: VmHWM, reset at entry."""
    gc.collect()
    release_memory()
    Path("/proc/self/clear_refs").write_text("5")
    start = _status_kib("VmRSS:")
    try:
        yield
    finally:
        into.append((_status_kib("VmHWM:") - start) / 1024)


# ---------------------------------------------------------------- contenders


def spectrum(loaded: LoadedModel, batch: Batch, layers: list[int] | None) -> None:
    options = SpectrumOptions(lam=LAM, layers=layers, conditioned=False)
    analyse_spectrum(loaded, replay([batch]), options, FROM)


def contenders(loaded: LoadedModel, batch: Batch) -> dict[str, Callable[[], object]]:
    return {
        "a": lambda: forward(loaded, [batch], eager=False),
        "b": lambda: forward(loaded, [batch], eager=True),
        "c": lambda: capture(loaded.adapter, batch, layers=None, sink=lambda layer: None),
        "d": lambda: spectrum(loaded, batch, [0]),
        "e": lambda: spectrum(loaded, batch, None),
    }


LABELS = {
    "a": "(a) forward, the model's own attention (sdpa)",
    "b": "(b) forward, eager attention",
    "c": "(c) capture only: hooks + eager, no-op sink",
    "d": "(d) spectrum --layers 0 --no-conditioned",
    "e": "(e) spectrum --no-conditioned (all layers)",
}


def measure(
    fns: dict[str, Callable[[], object]], repeats: int, memory: bool
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall times and peak RSS above start (MiB) of each contender, run interleaved."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    peaks: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            with peak_rss(peaks[name]) if memory else _nothing():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return times, peaks


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# ---------------------------------------------------------------- report


def run(shape: Llama, repeats: int) -> list[Verdict]:
    """Build, warm up, measure; print the table and return the memory verdict."""
    with tempfile.TemporaryDirectory(prefix="condcli-bench-llama-") as folder:
        loaded = build(shape, Path(folder), "cpu")
    batch = prompt(shape, loaded.device)
    params = sum(p.numel() for p in loaded.model.parameters())
    p_mib = shape.heads * shape.tokens**2 * loaded.dtype.itemsize / MIB
    print(
        f"\n=== cpu: {type(loaded.model).__name__} via the {loaded.family} adapter, {params / 1e6:.1f}M "
        f"parameters (d {shape.hidden}, {shape.layers} layers, {shape.heads} heads / {shape.kv_heads} KV), "
        f"{loaded.dtype}; 1 prompt of {shape.tokens} tokens ==="
    )
    print(f"one layer's P: {shape.heads} × {shape.tokens}² = {p_mib:.0f} MiB in {loaded.dtype}")
    short = replace(shape, tokens=min(shape.tokens, 16))
    measure(contenders(loaded, prompt(short, loaded.device)), 1, memory=False)  # warm-up: a short prompt
    memory = can_reset_peak()
    times, peaks = measure(contenders(loaded, batch), repeats, memory)
    t = {k: statistics.median(v) for k, v in times.items()}
    header = f"{'contender':<46} {'median s':>9} {'vs (a)':>8} {'vs (b)':>8} {'peak RSS +MiB':>14}"
    print(header)
    print("-" * len(header))
    for k, label in LABELS.items():
        mem = f"{max(peaks[k]):>14.0f}" if memory else f"{'n/a':>14}"
        print(f"{label:<46} {t[k]:>9.2f} {t[k] / t['a']:>7.2f}x {t[k] / t['b']:>7.2f}x {mem}")
    per_layer = (t["e"] - t["c"]) / shape.layers
    print(f"analysis per layer, ((e) − (c)) / {shape.layers}: {per_layer:.2f} s")
    if not memory:
        print("peak memory: n/a (this kernel does not let a process reset its high-water mark)")
        return []
    depth = max(peaks["e"]) - max(peaks["d"])
    more = max(shape.layers - 1, 1)
    print(
        f"memory of depth: (e) − (d) = {depth:.0f} MiB for {more} more analysed layers, "
        f"{depth / more:.0f} MiB per layer ({depth / more / p_mib:.2f} × one layer's P)"
    )
    # a layer's P kept after its analysis would cost at least one P per further layer
    per_layer = ratio(max(depth, 0.0), more * p_mib)
    return [Verdict("no layer's P kept: ((e) − (d)) per further layer / one layer's P", per_layer, 1.0)]


def main(argv: Sequence[str] | None = None) -> list[Verdict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=int, default=None, help="prompt length [2048; --tiny: 64]")
    parser.add_argument("--layers", type=int, default=None, help="decoder layers [12; --tiny: 2]")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tiny", action="store_true", help="smoke run: d 64, 2 layers, 64 tokens")
    parser.add_argument("--threads", type=int, default=None, help="torch threads [torch's default]")
    parser.add_argument(
        "--mix",
        action="store_true",
        help="heads that are not all floors (bench/long_mix.py): sdpa, eager returning attentions and "
        "spectrum side by side at --lengths, and the share of κ(P) decided in O(n²)",
    )
    parser.add_argument("--lengths", default="512,2048", help="--mix: prompt lengths [512,2048]")
    parser.add_argument(
        "--tempered",
        action="store_true",
        help="--mix: the tempered random-init Llama even where the sample is",
    )
    parser.add_argument(
        "--whole-process",
        action="store_true",
        help="--mix: also time each contender as a whole process, as issue 43 measured "
        "(bench/long_mix_process.py)",
    )
    args = parser.parse_args(argv)
    base = TINY if args.tiny else Llama()
    shape = replace(base, tokens=args.tokens or base.tokens, layers=args.layers or base.layers)
    saved = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        print((__doc__ or "").splitlines()[0])
        print(f"{machine()}\nmedian of {args.repeats} interleaved run(s)")
        if args.mix:
            lengths = [args.tokens] if args.tokens else long_mix.parse_lengths(args.lengths)
            verdicts = long_mix.side_by_side(shape, lengths, args.repeats, tempered=args.tempered)
            if args.whole_process:
                with tempfile.TemporaryDirectory(prefix="condcli-bench-process-") as work:
                    verdicts += long_mix_process.side_by_side(shape, lengths, args.repeats, Path(work))
        else:
            verdicts = run(shape, args.repeats)
        print_verdicts(verdicts)
        return verdicts
    finally:
        torch.set_num_threads(saved)


if __name__ == "__main__":
    main()
