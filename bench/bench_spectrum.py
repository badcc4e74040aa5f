"""`make bench`: what `condcli spectrum` and `sweep-lambda` cost on top of the model's own forward pass.

Workload (issue 5): ViT-B (random init), 32 synthetic images, batch 8, CPU — and the same on a GPU if there
is one. The pixel batches are built once and replayed to every contender, so input generation is not timed.
  1. forward alone (fused attention, what a user's own inference costs) vs full `spectrum` (embedding, all
     layers, μ): target ≤ 1.3× for the plain pass (--no-conditioned), and per forward pass for the default
     run, whose conditioned forward is a second forward pass by definition; and (issue 18) ≤ 2× for the
     full plain spectrum (d) against the forward (a), both timed side by side in this one run;
  2. `sweep-lambda` with 20 λ (1…20, no --layers) vs a single-λ `spectrum` of the embedding: target ≤ 1.5×,
     i.e. the 19 further λ add at most half of what the one-λ run costs. Both runs stop the model after its
     embedding now (capture's early stop), so the one-λ run (f) no longer holds a forward pass: the target is
     judged as what the 19 λ add, (g) − (f), against half of the model's forward (a), which (f) was before
     (its own ratio (g)/(f) is printed beside it);
  3. peak memory of the full `spectrum` on 32 vs 256 images, each in a fresh process: target ≤ 1.2×.
Timings are the median of interleaved repeats (a, b, c, …, a, b, c, …) after one warm-up batch each.
``--plain-only``: (a) and (d) alone (issue 18 item 5). ``--early-stop``: what capture's early stop saves,
runs that read the first layers (or only the embedding) timed as they run and with the model run to its end.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from unittest import mock

import torch

from condcli.analysis import driver, headmax
from condcli.analysis.embedding import EmbeddingAccumulator
from condcli.analysis.layers import ForwardAccumulator, weight_kappas_of
from condcli.analysis.persample import summarize_samples, trim
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.analysis.sweep import SweepOptions, analyse_sweep, lambda_grid
from condcli.capture import LayerCapture, capture
from condcli.inputs.batches import Batch, InputSpec, InputStream, stream
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.spectra import GRAM_MAX_KAPPA, strategies
from condcli.spectra.core import Method

MODEL = "vit_base_patch16_224"
LAM = 10.0  # the paper's λ, spectrum's default for a model without its own conditioning
FROM = "command line"
TARGET_OVERHEAD = 1.3
TARGET_PLAIN = 2.0  # issue 18 item 5: the full plain spectrum (d) at most twice the model's own forward (a)
TARGET_SWEEP = 1.5  # (g)/(f) when (f) held a forward pass: what 19 further λ add ≤ (TARGET_SWEEP − 1)·(a)
TARGET_MEMORY = 1.2
CHILD_TAG = "BENCH_SPECTRUM_CHILD "


@dataclass(frozen=True)
class Config:
    model: str = MODEL
    samples: int = 32
    batch_size: int = 8
    repeats: int = 2
    memory_samples: tuple[int, int] = (32, 256)
    threads: int | None = None  # torch.set_num_threads in this process and the memory children


@dataclass(frozen=True)
class Verdict:
    what: str
    value: float  # the ratio the target is judged on (of medians)
    target: float
    fastest: float | None = None  # the same ratio of the fastest runs, shown beside it

    @property
    def ok(self) -> bool:
        return self.value <= self.target

    def line(self) -> str:
        if not math.isfinite(
            self.value
        ):  # a clock or an RSS reading of a loaded machine gave nothing to divide
            return f"{self.what}: n/a (not measurable in this run) ≤ {self.target:g}x  MISS"
        beside = f" (fastest runs {self.fastest:.2f}x)" if self.fastest is not None else ""
        return f"{self.what}: {self.value:.2f}x{beside} ≤ {self.target:g}x  {'PASS' if self.ok else 'MISS'}"


def ratio(a: float, b: float) -> float:
    """a / b, NaN where b is not positive (a timing of 0 s or an RSS delta of 0 on a loaded machine)."""
    return a / b if b > 0 else math.nan


# ---------------------------------------------------------------- inputs and timing


def make_batches(loaded: LoadedModel, samples: int, batch_size: int) -> list[Batch]:
    """condcli's synthetic images through the model's preprocessing, once, already on the model's device."""
    spec = InputSpec(max_samples=samples, batch_size=batch_size, seed=0)
    return [
        Batch({k: v.to(loaded.device) for k, v in b.inputs.items()}, b.lengths, b.names)
        for b in stream(loaded.preprocessing, spec)
    ]


def replay(batches: list[Batch]) -> InputStream:
    """The same batches as a fresh stream, for every contender alike."""
    n = sum(b.size for b in batches)
    return InputStream(
        "synthetic", f"{n} synthetic 1/f images (replayed)", lambda s: iter(batches), expected=n
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fns: dict[str, Callable[[], object]], repeats: int, device: torch.device) -> dict[str, list[float]]:
    """Wall times of each function, run interleaved (a, b, …, a, b, …) so machine noise hits all alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - t0)
    return times


# ---------------------------------------------------------------- contenders


def forward(loaded: LoadedModel, batches: list[Batch], *, eager: bool) -> None:
    """The model's own forward on every batch (``model(pixels)`` for a timm ViT), nothing else."""
    adapter = loaded.adapter
    with adapter.eager_attention() if eager else nullcontext(), torch.no_grad():
        for b in batches:
            adapter.run(b.inputs)


def capture_only(loaded: LoadedModel, batches: list[Batch]) -> None:
    """spectrum's plain capture (hooks on every probe, eager attention) with a sink that drops everything."""
    for b in batches:
        capture(loaded.adapter, b, layers=None, sink=lambda layer: None)


def spectrum(
    loaded: LoadedModel, batches: list[Batch], *, layers: list[int] | None, conditioned: bool
) -> None:
    options = SpectrumOptions(lam=LAM, layers=layers, conditioned=conditioned)
    analyse_spectrum(loaded, replay(batches), options, FROM)


def sweep(loaded: LoadedModel, batches: list[Batch]) -> None:
    """`sweep-lambda` defaults: the paper's grid λ = 1…20 (20 points), no --layers."""
    options = SweepOptions(lambdas=lambda_grid(None, None, None), layers=())
    analyse_sweep(loaded, replay(batches), options, FROM)


def contenders(loaded: LoadedModel, batches: list[Batch]) -> dict[str, Callable[[], object]]:
    return {
        "a": lambda: forward(loaded, batches, eager=False),
        "b": lambda: forward(loaded, batches, eager=True),
        "c": lambda: spectrum(loaded, batches, layers=None, conditioned=True),
        "d": lambda: spectrum(loaded, batches, layers=None, conditioned=False),
        "e": lambda: capture_only(loaded, batches),
        "f": lambda: spectrum(loaded, batches, layers=[], conditioned=True),
        "g": lambda: sweep(loaded, batches),
    }


LABELS = {
    "a": "(a) forward, fused attention: model(pixels)",
    "b": "(b) forward, eager attention (what capture needs)",
    "c": "(c) spectrum: all layers, μ, conditioned forward",
    "d": "(d) spectrum: all layers, μ, --no-conditioned",
    "e": "(e) capture only: hooks + eager, no-op sink",
    "f": "(f) spectrum --layers none (embedding, one λ)",
    "g": "(g) sweep-lambda: 20 λ (1…20), no --layers",
}
LABEL_MKL = "(h) = (d), MKL threads inside each decomposition"  # --plain-only, CPU
LABEL_PRUNED = "(i) = (d), only the heads that decide the maxima"  # --plain-only, CPU (headmax: off there)


# ---------------------------------------------------------------- where the time goes


@dataclass(frozen=True)
class Part:
    what: str
    seconds: float  # for the whole run (one batch measured, times the number of batches)
    matrices: int  # for the whole run
    svd: int  # of which κ > GRAM_MAX_KAPPA: the Gram answer is dropped and the SVD recomputes it


def _clock(fn: Callable[[], object], device: torch.device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def _summary_part(
    what: str,
    mats: list[torch.Tensor],
    scale: int,
    device: torch.device,
    method: Method,
    *,
    threads: int | None = None,
) -> Part:
    """summarize_samples of ``mats`` with ``method`` as ForwardAccumulator runs it ("auto": Gram path, SVD
    where κ > 300; "svd": SVD straight away)."""
    got: list[torch.Tensor] = []
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        seconds = _clock(lambda: got.append(summarize_samples(mats, mats[0].dtype, method).kappa), device)
    finally:
        torch.set_num_threads(saved)
    kappa = got[0]
    svd = int((~torch.isfinite(kappa) | (kappa > GRAM_MAX_KAPPA)).sum())
    return Part(what, seconds * scale, kappa.numel() * scale, svd * scale)


def _stages(loaded: LoadedModel, first: Batch, scale: int) -> list[Part]:
    adapter, device = loaded.adapter, loaded.device
    layers: dict[int, LayerCapture] = {}
    got = capture(adapter, first, layers=None, sink=lambda layer: layers.__setitem__(layer.index, layer))
    xs = trim(got.x, first.lengths, (0,))
    weights = {s.index: s.weights() for s in adapter.layers}
    w_time = _clock(lambda: weight_kappas_of(weights), device)
    kappas = weight_kappas_of(weights)
    accs = {
        s.index: ForwardAccumulator(s, weights[s.index], kappas[s.index].heads, per_head=False)
        for s in adapter.layers
    }
    emb = EmbeddingAccumulator(LAM)
    parts = [
        Part("κ(W_Q, W_K, W_V) per layer and head (once per run)", w_time, 0, 0),
        Part("X: κ(X), κ(X + λI), κ(X + C), spectra", _clock(lambda: emb.add(xs), device) * scale, 0, 0),
    ]

    def analyse_layers() -> None:
        for i, layer in layers.items():
            accs[i].add(layer, first.lengths)

    per_layer = _clock(analyse_layers, device)
    parts.append(Part("per layer, all of it (X_l, A_l, P, μ)", per_layer * scale, 0, 0))
    for what, probe, dims in (("  of which X_l", "x_in", (0,)), ("  of which A_l", "attn_in", (1,))):
        mats = [m for layer in layers.values() for m in trim(getattr(layer, probe), first.lengths, dims)]
        parts.append(_summary_part(what, mats, scale, device, "auto"))
    probs = [layer.probs for layer in layers.values() if layer.probs is not None]
    if not probs:
        return parts
    mats = [m for p in probs for m in trim(p, first.lengths, (2, 3))]
    parts.append(_summary_part("  of which P (softmax probabilities), by SVD", mats, scale, device, "svd"))
    if device.type == "cpu" and torch.get_num_threads() > 1:
        one = _summary_part(
            "  what-if: P with torch.set_num_threads(1)", mats, scale, device, "svd", threads=1
        )
        parts.append(one)
    parts.append(_summary_part("  what-if: P by the Gram path first (auto)", mats, scale, device, "auto"))
    return parts


def breakdown(loaded: LoadedModel, batches: list[Batch], repeats: int) -> list[Part]:
    """Each analysis stage of the plain pass (d), timed on the first batch's captured tensors (median of
    ``repeats``) and scaled to the whole run."""
    runs = [_stages(loaded, batches[0], len(batches)) for _ in range(max(repeats, 1))]
    return [replace(p, seconds=statistics.median(r[i].seconds for r in runs)) for i, p in enumerate(runs[0])]


# ---------------------------------------------------------------- peak memory (fresh process per size)


def _rss_kib() -> int:
    """Current resident set size (VmRSS), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def memory_child(model: str, samples: int, batch_size: int, device: str) -> dict[str, float]:
    """Full spectrum (all layers, μ, conditioned forward) on lazily streamed inputs; peak memory in MiB."""
    loaded = load(model, LoadOptions(weights="random", device=device))
    cuda = loaded.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(loaded.device)
    after_load = _rss_kib()
    gpu_after_load = torch.cuda.memory_allocated(loaded.device) if cuda else 0
    inputs = stream(loaded.preprocessing, InputSpec(max_samples=samples, batch_size=batch_size, seed=0))
    t0 = time.perf_counter()
    analyse_spectrum(loaded, inputs, SpectrumOptions(lam=LAM), FROM)
    out = {
        "seconds": time.perf_counter() - t0,
        "rss_after_load": after_load / 1024,
        "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
    }
    if cuda:
        out["gpu_after_load"] = gpu_after_load / 2**20
        out["gpu_peak"] = torch.cuda.max_memory_allocated(loaded.device) / 2**20
    return out


def run_child(cfg: Config, samples: int, device: torch.device) -> dict[str, float]:
    cmd = [sys.executable, "-m", "bench.bench_spectrum", "--child", str(samples), "--model", cfg.model]
    cmd += ["--batch-size", str(cfg.batch_size), "--device", str(device)]
    if cfg.threads is not None:
        cmd += ["--threads", str(cfg.threads)]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(CHILD_TAG)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"memory child for {samples} images failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    result: dict[str, float] = json.loads(lines[-1].removeprefix(CHILD_TAG))
    return result


# ---------------------------------------------------------------- report


def _table(raw: dict[str, list[float]], rows: list[tuple[str, list[float], str]]) -> None:
    """One line per (label, times, key of the times it is compared with): medians and their ratio, and the
    ratio of the fastest runs (robust to a repeat that another job on the machine slowed down)."""
    header = f"{'contender':<52} {'median s':>9} {'min–max s':>13}  {'median ratio':>16} {'min ratio':>9}"
    print(header)
    print("-" * len(header))
    for label, times, base in rows:
        spread = f"{min(times):.2f}–{max(times):.2f}"
        ratio = f"{statistics.median(times) / statistics.median(raw[base]):.2f}x ({base})"
        fastest = f"{min(times) / min(raw[base]):.2f}x"
        print(f"{label:<52} {statistics.median(times):>9.2f} {spread:>13}  {ratio:>16} {fastest:>9}")


def bench_device(cfg: Config, device: torch.device) -> list[Verdict]:
    """All three parts on one device; prints the tables and returns the verdicts."""
    loaded = load(cfg.model, LoadOptions(weights="random", device=str(device)))
    batches = make_batches(loaded, cfg.samples, cfg.batch_size)
    fns = contenders(loaded, batches)
    timed(contenders(loaded, batches[:1]), 1, device)  # warm-up: one batch of each
    raw = timed(fns, cfg.repeats, device)
    t = {k: statistics.median(v) for k, v in raw.items()}
    n = sum(b.size for b in batches)
    print(f"\n=== {device}: {cfg.model} (random init), {n} synthetic images, batch {cfg.batch_size} ===")
    print("\npart 1 — forward alone vs full spectrum")
    per_pass = [c / 2 for c in raw["c"]]
    _table(
        raw, [(LABELS[k], raw[k], "a") for k in "abcde"] + [("(c) per forward pass: (c) / 2", per_pass, "a")]
    )
    print("\nwhere the time of (d) goes (the first batch's captured tensors, times the number of batches):")
    parts = breakdown(loaded, batches, cfg.repeats)
    print(f"{'stage':<52} {'s':>9}  {'matrices':>9} {'κ > 300':>10}")
    for p in parts:
        counts = f"{p.matrices:>9} {p.svd:>10}" if p.matrices else ""
        print(f"{p.what:<52} {p.seconds:>9.2f}  {counts}")
    print(f"{'capture (e) + X + per layer + weights, vs (d) measured':<52} ", end="")
    print(f"{t['e'] + sum(p.seconds for p in parts[:3]):>9.2f}  vs {t['d']:.2f}")
    print("\npart 2 — sweep-lambda (20 λ) vs single-λ spectrum")
    _table(
        raw,
        [
            (LABELS["f"], raw["f"], "a"),
            (LABELS["g"], raw["g"], "f"),
            ("(g) against the forward (a)", raw["g"], "a"),
            ("(g) against the full default spectrum (c)", raw["g"], "c"),
        ],
    )
    m = {k: min(v) for k, v in raw.items()}
    verdicts = [
        Verdict(
            f"{device} spectrum --no-conditioned (d)/(a)",
            ratio(t["d"], t["a"]),
            TARGET_OVERHEAD,
            ratio(m["d"], m["a"]),
        ),
        Verdict(
            f"{device} full plain spectrum (d)/(a), issue 18",
            ratio(t["d"], t["a"]),
            TARGET_PLAIN,
            ratio(m["d"], m["a"]),
        ),
        Verdict(
            f"{device} spectrum per forward pass (c)/(2·a)",
            ratio(t["c"], 2 * t["a"]),
            TARGET_OVERHEAD,
            ratio(m["c"], 2 * m["a"]),
        ),
        Verdict(
            f"{device} sweep-lambda, 19 further λ against the forward 1 + ((g) − (f))/(a)",
            1 + ratio(t["g"] - t["f"], t["a"]),
            TARGET_SWEEP,
            1 + ratio(m["g"] - m["f"], m["a"]),
        ),
    ]
    del fns, batches, loaded
    small, large = cfg.memory_samples
    print(f"\npart 3 — peak memory of the full spectrum, {small} vs {large} images (a fresh process each)")
    mem = {s: run_child(cfg, s, device) for s in (small, large)}
    keys = [("rss_peak", "peak RSS"), ("rss_after_load", "RSS after load")]
    if device.type == "cuda":
        keys += [("gpu_peak", "GPU max_memory_allocated"), ("gpu_after_load", "GPU allocated after load")]
    header = f"{'MiB':<30} {small:>10} {large:>10} {'ratio':>8}"
    print(header)
    print("-" * len(header))
    for key, label in keys:
        a, b = mem[small][key], mem[large][key]
        print(f"{label:<30} {a:>10.0f} {b:>10.0f} {b / a:>7.2f}x")
    for key, label in keys[::2]:
        base = key.replace("peak", "after_load")
        a, b = mem[small][key] - mem[small][base], mem[large][key] - mem[large][base]
        print(
            f"{label + ' − after load':<30} {a:>10.0f} {b:>10.0f} {b / a if a > 0 else float('nan'):>7.2f}x"
        )
    print(f"{'run time, s':<30} {mem[small]['seconds']:>10.1f} {mem[large]['seconds']:>10.1f}")
    for key, label in keys[::2]:
        ratio_ = ratio(mem[large][key], mem[small][key])
        verdicts.append(Verdict(f"{device} {label} {large} vs {small} images", ratio_, TARGET_MEMORY))
    return verdicts


def spectrum_mkl_threaded(loaded: LoadedModel, batches: list[Batch]) -> None:
    """(d) with each small decomposition on MKL's own thread count instead of one MKL thread per call
    (:func:`condcli.spectra.strategies.one_blas_thread` switched off): what that choice saves."""
    saved = strategies._MKL_THREADS
    strategies._MKL_THREADS = None
    try:
        spectrum(loaded, batches, layers=None, conditioned=False)
    finally:
        strategies._MKL_THREADS = saved


def spectrum_pruned(loaded: LoadedModel, batches: list[Batch]) -> None:
    """(d) with the maxima over heads taken from the heads that can decide them
    (:mod:`condcli.analysis.headmax`, off by default on CPU): what that would save here."""
    with headmax.forced(True):
        spectrum(loaded, batches, layers=None, conditioned=False)


def bench_plain(cfg: Config, device: torch.device) -> list[Verdict]:
    """Issue 18 item 5 alone: the forward (a) and the full plain spectrum (d), interleaved side by side; on
    CPU also (h), (d) with MKL threads inside each small decomposition, and (i), (d) pruned over heads."""
    loaded = load(cfg.model, LoadOptions(weights="random", device=str(device)))
    batches = make_batches(loaded, cfg.samples, cfg.batch_size)
    keys = "ad"
    if device.type == "cpu":
        keys += ("h" if strategies._MKL_THREADS is not None else "") + "i"

    def pick(b: list[Batch]) -> dict[str, Callable[[], object]]:
        fns = {k: v for k, v in contenders(loaded, b).items() if k in keys}
        if "h" in keys:
            fns["h"] = lambda: spectrum_mkl_threaded(loaded, b)
        if "i" in keys:
            fns["i"] = lambda: spectrum_pruned(loaded, b)
        return fns

    timed(pick(batches[:1]), 1, device)  # warm-up
    raw = timed(pick(batches), cfg.repeats, device)
    n = sum(b.size for b in batches)
    print(f"\n=== {device}: {cfg.model} (random init), {n} synthetic images, batch {cfg.batch_size} ===")
    labels = {**LABELS, "h": LABEL_MKL, "i": LABEL_PRUNED}
    _table(raw, [(labels[k], raw[k], "a") for k in keys])
    t = {k: statistics.median(v) for k, v in raw.items()}
    m = {k: min(v) for k, v in raw.items()}
    what = f"{device} full plain spectrum (d)/(a), issue 18"
    return [Verdict(what, ratio(t["d"], t["a"]), TARGET_PLAIN, ratio(m["d"], m["a"]))]


def _whole_forward(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` with every capture running the model to its end (``to_end=True``), as before the early stop."""

    def run() -> object:
        with mock.patch.object(driver, "capture", functools.partial(capture, to_end=True)):
            return fn()

    return run


def bench_early_stop(cfg: Config, device: torch.device) -> list[Verdict]:
    """What capture's early stop saves: runs that read the model's first layers only, each timed as it runs
    and with the whole model run to its end, interleaved with the forward (a). No target: printed only."""
    loaded = load(cfg.model, LoadOptions(weights="random", device=str(device)))
    batches = make_batches(loaded, cfg.samples, cfg.batch_size)

    labels = {
        "l0": "spectrum --layers 0 --no-conditioned",
        "f": "(f) spectrum --layers none",
        "g": "(g) sweep-lambda: 20 λ, no --layers",
        "d": "(d) spectrum: all layers, --no-conditioned",
    }

    def pick(b: list[Batch]) -> dict[str, Callable[[], object]]:
        runs: dict[str, Callable[[], object]] = {
            "l0": lambda: spectrum(loaded, b, layers=[0], conditioned=False),
            "f": lambda: spectrum(loaded, b, layers=[], conditioned=True),
            "g": lambda: sweep(loaded, b),
            "d": lambda: spectrum(loaded, b, layers=None, conditioned=False),
        }
        out: dict[str, Callable[[], object]] = {"a": lambda: forward(loaded, b, eager=False)}
        for key, fn in runs.items():
            out[key], out[key + "/whole"] = fn, _whole_forward(fn)
        return out

    timed(pick(batches[:1]), 1, device)  # warm-up
    raw = timed(pick(batches), cfg.repeats, device)
    n = sum(b.size for b in batches)
    print(f"\n=== {device}: {cfg.model} (random init), {n} synthetic images, batch {cfg.batch_size} ===")
    rows = [(LABELS["a"], raw["a"], "a")]
    for key, label in labels.items():
        rows += [(label, raw[key], "a"), (label + ", whole model", raw[key + "/whole"], "a")]
    _table(raw, rows)
    return []


def devices(choice: str) -> list[torch.device]:
    """auto: the CPU, and the GPU as well when there is one."""
    if choice == "auto":
        return [torch.device("cpu")] + ([torch.device("cuda", 0)] if torch.cuda.is_available() else [])
    return [torch.device(choice)]


def machine() -> str:
    gpu = f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    load1, _, _ = os.getloadavg()
    return (
        f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs"
        f"{gpu}; load average at start {load1:.2f}"
    )


def main(argv: Sequence[str] | None = None) -> list[Verdict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CPU, then the GPU if any), cpu or cuda")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 images, memory 8 vs 64, 1 repeat")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--samples", type=int, default=None, help="images timed in parts 1–2 [32]")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--memory-samples", type=int, nargs=2, default=None, metavar=("SMALL", "LARGE"))
    parser.add_argument("--threads", type=int, default=None, help="torch threads [torch's default]")
    parser.add_argument(
        "--plain-only", action="store_true", help="time (a) and (d) only: the issue 18 item 5 ratio"
    )
    parser.add_argument(
        "--early-stop",
        action="store_true",
        help="time runs that read the first layers only, stopped early and run to the model's end",
    )
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    saved = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(saved)


def _run(args: argparse.Namespace) -> list[Verdict]:
    if args.child is not None:
        print(CHILD_TAG + json.dumps(memory_child(args.model, args.child, args.batch_size, args.device)))
        return []
    quick = args.quick
    memory = args.memory_samples or ((8, 64) if quick else (32, 256))
    cfg = Config(
        model=args.model,
        samples=args.samples or (8 if quick else 32),
        batch_size=args.batch_size,
        repeats=1 if quick and args.repeats == 2 else args.repeats,
        memory_samples=(memory[0], memory[1]),
        threads=args.threads,
    )
    print((__doc__ or "").splitlines()[0])
    print(f"{machine()}\nmedian of {cfg.repeats} interleaved repeat(s), λ = {LAM:g}")
    run = bench_early_stop if args.early_stop else bench_plain if args.plain_only else bench_device
    verdicts = [v for d in devices(args.device) for v in run(cfg, d)]
    print_verdicts(verdicts)
    return verdicts


def print_verdicts(verdicts: Sequence[Verdict]) -> None:
    """Each target's verdict, after the load average at the end of the run (noisy machines say so)."""
    print(f"\ntargets (load average at end {os.getloadavg()[0]:.2f}):")
    for v in verdicts:
        print("  " + v.line())


if __name__ == "__main__":
    main()
