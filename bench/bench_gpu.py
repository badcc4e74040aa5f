"""`make bench`, GPU part (issue 18 item 2): `condcli spectrum` on a CUDA GPU vs its forward and the CPU.

Without CUDA it prints one line saying the GPU figures are not measured on this machine and exits 0.
With CUDA (``python -m bench.bench_gpu``):
  1. ViT-B/16 (timm, random init) over 1,024 synthetic images, batch 32, on the GPU: wall time of the full
     plain `spectrum` (embedding, every layer, μ, κ(P): all metrics but the conditioned forward, as the CPU
     bench measures it) against the model's own forward on the same device (fused attention): target ≤ 1.5×;
     against the CPU path: target ≥ 20× faster. The CPU path is measured on a subset (``--cpu-images``) and
     scaled linearly to the full count; the output says so.
  2. The linear-algebra strategies (condcli.spectra.strategies: loop, threads, batched) on the device: the
     same spectrum on ``--strategy-images`` images under each, and the bare decompositions of one batch's
     P-shaped stack (samples × 12 heads × 197 × 197, float64) by each; the spectrum both with every head's
     P decomposed and with the maxima over heads pruned (condcli.analysis.headmax). The CUDA defaults of
     both (strategies.DEFAULTS, headmax.DEFAULTS) are the ones to confirm or change from these numbers.
  3. A ~1.03B-parameter Llama-style decoder (random init, TinyLlama-1.1B's shape: d 2048, 22 layers, 32 query
     / 4 KV heads, MLP 5632, vocab 32000), bf16, one prompt of 2,048 tokens: forward and full plain
     `spectrum` time, and the peak GPU memory of each (torch.cuda.max_memory_allocated).
Timings: median of ``--repeats`` interleaved runs after one warm-up batch each, the device synchronised
around each run. Within a 10-minute command limit, run the parts apart: ``--no-llm`` (parts 1–2 and the CPU
path), then ``--llm-only``; ``--images``, ``--repeats`` and ``--llm-layers`` shrink a part that runs long.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from bench.bench_long_sequence import Llama, build, prompt
from bench.bench_spectrum import (
    Verdict,
    forward,
    machine,
    make_batches,
    print_verdicts,
    ratio,
    replay,
    sync,
    timed,
)
from condcli.analysis import headmax
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.spectra import strategies

MODEL = "vit_base_patch16_224"
LAM = 10.0
FROM = "command line"
TARGET_FORWARD = 1.5  # spectrum ≤ 1.5× the forward on the same GPU
TARGET_SPEEDUP = 20.0  # GPU spectrum ≥ 20× faster than the CPU path
NOT_MEASURED = "GPU figures not measured on this machine: CUDA is not available"
MIB = 2**20
# TinyLlama-1.1B's shape (random init): 1.03B parameters as a LlamaModel (no LM head)
LLM = Llama(hidden=2048, layers=22, heads=32, kv_heads=4, mlp=5632, vocab=32000, tokens=2048)
TINY_LLM = Llama(hidden=64, layers=2, heads=4, kv_heads=2, mlp=128, vocab=1000, tokens=32)


@dataclass(frozen=True)
class AtLeast(Verdict):
    """A target that is a floor (a speed-up of at least ``target``)."""

    @property
    def ok(self) -> bool:
        return self.value >= self.target

    def line(self) -> str:
        beside = f" (fastest runs {self.fastest:.1f}x)" if self.fastest is not None else ""
        return f"{self.what}: {self.value:.1f}x{beside} ≥ {self.target:g}x  {'PASS' if self.ok else 'MISS'}"


@dataclass(frozen=True)
class Config:
    device: str = "cuda"
    model: str = MODEL
    images: int = 1024
    batch_size: int = 32
    cpu_images: int = 32  # the CPU path's subset (scaled to ``images``)
    strategy_images: int = 64
    repeats: int = 2
    llm: Llama | None = LLM


def spectrum(loaded: LoadedModel, batches: list[Batch]) -> None:
    """The full plain spectrum: embedding, every layer, μ, κ(P) — no conditioned forward."""
    analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=LAM, conditioned=False), FROM)


def _median(times: list[float]) -> float:
    return statistics.median(times)


def vit_on_device(cfg: Config, device: torch.device) -> tuple[LoadedModel, list[Verdict], float]:
    """Part 1 on the device: forward vs spectrum over ``cfg.images``. Returns the model, the ≤ 1.5× verdict
    and the median spectrum time (for the CPU comparison)."""
    loaded = load(cfg.model, LoadOptions(weights="random", device=str(device)))
    batches = make_batches(loaded, cfg.images, cfg.batch_size)
    fns: dict[str, Callable[[], object]] = {
        "forward": lambda: forward(loaded, batches, eager=False),
        "spectrum": lambda: spectrum(loaded, batches),
    }
    timed(_first_batch(loaded, batches), 1, device)  # warm-up: one batch of each
    raw = timed(fns, cfg.repeats, device)
    t = {k: _median(v) for k, v in raw.items()}
    n = sum(b.size for b in batches)
    print(f"\n=== {device}: {cfg.model} (random init), {n} synthetic images, batch {cfg.batch_size} ===")
    print(f"forward, fused attention (model(pixels)): {t['forward']:9.2f} s")
    print(f"full plain spectrum (all metrics):         {t['spectrum']:9.2f} s")
    print(f"ratio spectrum / forward on {device}:        {ratio(t['spectrum'], t['forward']):9.2f}x")
    fastest = ratio(min(raw["spectrum"]), min(raw["forward"]))
    verdict = Verdict(
        f"{device} full plain spectrum / forward, {n} images",
        ratio(t["spectrum"], t["forward"]),
        TARGET_FORWARD,
        fastest,
    )
    return loaded, [verdict], t["spectrum"]


def _first_batch(loaded: LoadedModel, batches: list[Batch]) -> dict[str, Callable[[], object]]:
    return {
        "forward": lambda: forward(loaded, batches[:1], eager=False),
        "spectrum": lambda: spectrum(loaded, batches[:1]),
    }


def cpu_path(cfg: Config, device_seconds: float) -> list[Verdict]:
    """The same spectrum on the CPU over ``cfg.cpu_images`` images, scaled to ``cfg.images``."""
    cpu = torch.device("cpu")
    loaded = load(cfg.model, LoadOptions(weights="random", device="cpu"))
    count = min(cfg.cpu_images, cfg.images)
    batches = make_batches(loaded, count, min(cfg.batch_size, count))
    timed({"warm-up": lambda: spectrum(loaded, batches[:1])}, 1, cpu)
    seconds = _median(timed({"cpu": lambda: spectrum(loaded, batches)}, 1, cpu)["cpu"])
    scaled = seconds * cfg.images / count
    speedup = ratio(scaled, device_seconds)
    print(
        f"\nCPU path ({torch.get_num_threads()} torch threads): {seconds:.2f} s on {count} images, scaled "
        f"× {cfg.images}/{count} = {scaled:.1f} s for {cfg.images} (measured on a subset and scaled)"
    )
    print(f"GPU speed-up over the CPU path: {speedup:.1f}x")
    return [AtLeast(f"GPU spectrum vs CPU path (CPU scaled from {count} images)", speedup, TARGET_SPEEDUP)]


def _spectrum_pruned(loaded: LoadedModel, batches: list[Batch], on: bool) -> None:
    with headmax.forced(on):
        spectrum(loaded, batches)


def p_stack(samples: int, device: torch.device, heads: int = 12, n: int = 197) -> torch.Tensor:
    """A P-shaped float64 stack (samples, heads, n, n): softmax rows of random logits, seed 0."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(samples, heads, n, n, generator=g, dtype=torch.float64) * 3
    return torch.softmax(logits, -1).to(device)


def compare_strategies(cfg: Config, loaded: LoadedModel, device: torch.device) -> dict[str, float]:
    """Part 2: spectrum on ``cfg.strategy_images`` and the bare P decompositions under each strategy."""
    count = min(cfg.strategy_images, cfg.images)
    batches = make_batches(loaded, count, min(cfg.batch_size, count))
    x = p_stack(min(cfg.batch_size, count), device)
    gram = x @ x.mT
    rows: dict[str, tuple[float, float, float, float]] = {}
    for name in strategies.STRATEGIES:
        with strategies.using(name):
            fns: dict[str, Callable[[], object]] = {
                "spectrum": lambda: _spectrum_pruned(loaded, batches, False),
                "pruned": lambda: _spectrum_pruned(loaded, batches, True),
                "svdvals": lambda: strategies.run_grouped(torch.linalg.svdvals, x),
                "eigvalsh": lambda: strategies.run_grouped(torch.linalg.eigvalsh, gram),
            }
            timed(fns, 1, device)  # warm-up (cuSOLVER handles, the thread pool)
            raw = timed(fns, cfg.repeats, device)
        spec, pruned, svd, eig = (_median(raw[k]) for k in ("spectrum", "pruned", "svdvals", "eigvalsh"))
        rows[name] = (spec, pruned, svd, eig)
    default = strategies.DEFAULTS.get(device.type, "loop")
    prune = headmax.enabled(device, causal=False, tokens=197)  # ViT-B's attention is not causal
    print(
        f"\nlinear-algebra strategies on {device} (default here: {default}, pruned maxima over heads: "
        f"{'on' if prune else 'off'}); spectrum over {count} images with every head's P decomposed and "
        f"pruned (condcli.analysis.headmax), bare decompositions of one {tuple(x.shape)} float64 P stack"
    )
    header = (
        f"{'strategy':<10} {'spectrum s':>11} {'pruned s':>9} {'svdvals s':>10} {'Gram eigvalsh s':>16}  what"
    )
    print(header)
    print("-" * len(header))
    for name, (spec, pruned, svd, eig) in rows.items():
        print(
            f"{name:<10} {spec:>11.2f} {pruned:>9.2f} {svd:>10.3f} {eig:>16.3f}  "
            + strategies.STRATEGIES[name].summary
        )
    best = min(rows, key=lambda k: min(rows[k][:2]))
    best_prune = rows[best][1] < rows[best][0]
    print(
        f"fastest spectrum: {best}, {'pruned' if best_prune else 'every head'}"
        + ("" if best == default else f" (not the default {default}: change strategies.DEFAULTS)")
        + ("" if best_prune == prune else " (not headmax.DEFAULTS: change it)")
    )
    return {name: r[0] for name, r in rows.items()}


def llm(shape: Llama, device: torch.device, repeats: int) -> dict[str, float]:
    """Part 3: the Llama-style decoder in bf16 on one prompt; time and peak GPU memory."""
    with tempfile.TemporaryDirectory(prefix="condcli-bench-gpu-llama-") as folder:
        loaded = build(shape, Path(folder), str(device), dtype="bfloat16")
    params = sum(p.numel() for p in loaded.model.parameters())
    batch = prompt(shape, loaded.device)
    short = prompt(replace(shape, tokens=min(shape.tokens, 16)), loaded.device)
    cuda = device.type == "cuda"
    warm: dict[str, Callable[[], object]] = {
        "forward": lambda: forward(loaded, [short], eager=False),
        "spectrum": lambda: spectrum(loaded, [short]),
    }
    timed(warm, 1, device)
    after_load = torch.cuda.memory_allocated(device) / MIB if cuda else math.nan
    print(
        f"\n=== {device}: Llama-style decoder, {params / 1e9:.2f}B parameters (d {shape.hidden}, "
        f"{shape.layers} layers, {shape.heads} heads / {shape.kv_heads} KV, MLP {shape.mlp}), "
        f"{loaded.dtype}, random init; 1 prompt of {shape.tokens} tokens ==="
    )
    header = f"{'contender':<44} {'median s':>9} {'peak GPU MiB':>13}"
    print(header)
    print("-" * len(header))
    results: dict[str, float] = {}
    runs: list[tuple[str, Callable[[], object]]] = [
        ("forward, the model's own attention (sdpa)", lambda: forward(loaded, [batch], eager=False)),
        ("full plain spectrum (all layers, κ(P) …)", lambda: spectrum(loaded, [batch])),
    ]
    for label, fn in runs:
        times = []
        peak = math.nan
        for _ in range(repeats):
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            times.append(time.perf_counter() - t0)
            if cuda:
                peak = max(0.0 if math.isnan(peak) else peak, torch.cuda.max_memory_allocated(device) / MIB)
        results[label] = _median(times)
        print(f"{label:<44} {results[label]:>9.2f} {_mib(peak):>13}")
    print(f"GPU memory allocated after load (weights): {_mib(after_load)} MiB")
    first, second = results.values()
    print(f"ratio spectrum / forward: {second / first:.2f}x (reported; no target)")
    return results


def _mib(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f}"


def main(argv: Sequence[str] | None = None) -> list[Verdict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N (or cpu: the smoke test's tiny run)")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cpu-images", type=int, default=32, help="CPU subset, scaled to --images [32]")
    parser.add_argument("--strategy-images", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--llm-layers", type=int, default=None, help="decoder layers [22]")
    parser.add_argument("--llm-tokens", type=int, default=None, help="prompt length [2048]")
    parser.add_argument("--tiny-llm", action="store_true", help="smoke run: a 2-layer d-64 decoder")
    parser.add_argument("--no-llm", action="store_true", help="parts 1–2 only (ViT-B, strategies, CPU path)")
    parser.add_argument("--llm-only", action="store_true", help="part 3 only (the decoder)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"{NOT_MEASURED} (torch {torch.__version__}); run `python -m bench.bench_gpu` on a GPU machine")
        return []
    base = TINY_LLM if args.tiny_llm else LLM
    shape = replace(base, layers=args.llm_layers or base.layers, tokens=args.llm_tokens or base.tokens)
    cfg = Config(
        device=args.device,
        model=args.model,
        images=args.images,
        batch_size=args.batch_size,
        cpu_images=args.cpu_images,
        strategy_images=args.strategy_images,
        repeats=args.repeats,
        llm=None if args.no_llm else shape,
    )
    print((__doc__ or "").splitlines()[0])
    gpu = f"; {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    print(f"{machine()}{gpu}\nmedian of {cfg.repeats} interleaved repeat(s), λ = {LAM:g}")
    verdicts: list[Verdict] = []
    if not args.llm_only:
        loaded, verdicts, seconds = vit_on_device(cfg, device)
        compare_strategies(cfg, loaded, device)
        del loaded
        verdicts += cpu_path(cfg, seconds)
    if cfg.llm is not None:
        llm(cfg.llm, device, cfg.repeats)
    print_verdicts(verdicts)
    return verdicts


if __name__ == "__main__":
    main()
