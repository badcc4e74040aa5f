"""`make bench`: what the P spectra of `condcli rank-decay` cost next to the forward pass that makes P.

Workload (issue 6): ViT-B (random init), 8 synthetic images, batch 8, CPU — and the same on a GPU if there
is one. Target: the float64 singular values of every layer's P (12 layers × 8 images × 12 heads = 1,152
matrices of 197 × 197) cost no more than the model's forward pass on the same images.
  (a) the model's own forward (fused attention): what a user's inference costs;
  (b) rank-decay's capture: eager attention with hooks on P, a sink that drops everything;
  (c) the P spectra alone: condcli's batched float64 path on P captured beforehand;
  (d) the whole plain `rank-decay` (capture, spectra, X, aggregation);
  (e) `rank-decay --conditioned 10` (a second, conditioned forward by definition).
Timings are the median of interleaved repeats (a, b, c, …, a, b, c, …) after one warm-up of each.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence

import torch

from bench.bench_spectrum import (
    Verdict,
    devices,
    forward,
    machine,
    make_batches,
    print_verdicts,
    ratio,
    replay,
    timed,
)
from condcli.analysis.persample import trim
from condcli.analysis.rank_decay import RankDecayOptions, analyse_rank_decay
from condcli.analysis.rank_layers import sample_spectra
from condcli.capture import LayerCapture, capture
from condcli.inputs.batches import Batch
from condcli.loading.sources import LoadedModel, LoadOptions, load

MODEL = "vit_base_patch16_224"
LAM = 10.0
TARGET = 1.0  # P spectra ≤ one forward pass

LABELS = {
    "a": "(a) forward, fused attention: model(pixels)",
    "b": "(b) rank-decay capture: eager + hooks on P, no-op sink",
    "c": "(c) P spectra alone: float64 σ of every P",
    "d": "(d) rank-decay, plain forward (all of it)",
    "e": "(e) rank-decay --conditioned 10 (two forwards)",
}


def captured_probs(
    loaded: LoadedModel, batches: list[Batch]
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Every layer's P of every batch, captured once (outside the timing) for contender (c)."""
    out: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    for b in batches:

        def keep(layer: LayerCapture, lengths: torch.Tensor | None = b.lengths) -> None:
            assert layer.probs is not None
            out.append((layer.probs, lengths))

        capture(loaded.adapter, b, probes=("probs",), sink=keep)
    return out


def contenders(loaded: LoadedModel, batches: list[Batch]) -> dict[str, Callable[[], object]]:
    probs = captured_probs(loaded, batches)

    def spectra() -> None:
        for p, lengths in probs:
            sample_spectra(trim(p, lengths, (2, 3)))

    def capture_p() -> None:
        for b in batches:
            capture(loaded.adapter, b, probes=("probs",), sink=lambda layer: None)

    return {
        "a": lambda: forward(loaded, batches, eager=False),
        "b": capture_p,
        "c": spectra,
        "d": lambda: analyse_rank_decay(loaded, replay(batches), RankDecayOptions(lam=LAM), "bench"),
        "e": lambda: analyse_rank_decay(
            loaded, replay(batches), RankDecayOptions(lam=LAM, conditioned=True), "bench"
        ),
    }


def _table(raw: dict[str, list[float]], rows: list[tuple[str, str]]) -> None:
    header = f"{'contender':<52} {'median s':>9} {'min–max s':>13}  {'median ratio':>16} {'min ratio':>9}"
    print(header)
    print("-" * len(header))
    for key, base in rows:
        times = raw[key]
        spread = f"{min(times):.2f}–{max(times):.2f}"
        ratio = f"{statistics.median(times) / statistics.median(raw[base]):.2f}x ({base})"
        fastest = f"{min(times) / min(raw[base]):.2f}x"
        print(f"{LABELS[key]:<52} {statistics.median(times):>9.2f} {spread:>13}  {ratio:>16} {fastest:>9}")


def bench_device(
    model: str, samples: int, batch_size: int, repeats: int, device: torch.device
) -> list[Verdict]:
    loaded = load(model, LoadOptions(weights="random", device=str(device)))
    batches = make_batches(loaded, samples, batch_size)
    fns = contenders(loaded, batches)
    timed(fns, 1, device)  # warm-up
    raw = timed(fns, repeats, device)
    n = sum(b.size for b in batches)
    matrices = sum(layer.heads * n for layer in loaded.adapter.layers)  # per layer, head and image (ViT)
    print(
        f"\n=== {device}: {model} (random init), {n} synthetic images, batch {batch_size}, {matrices} P ==="
    )
    _table(raw, [("a", "a"), ("b", "a"), ("c", "a"), ("c", "b"), ("d", "a"), ("e", "a")])
    t = {k: statistics.median(v) for k, v in raw.items()}
    m = {k: min(v) for k, v in raw.items()}
    return [
        Verdict(
            f"{device} rank-decay P spectra vs forward (c)/(a)",
            ratio(t["c"], t["a"]),
            TARGET,
            ratio(m["c"], m["a"]),
        ),
        Verdict(
            f"{device} rank-decay P spectra vs its own forward (c)/(b)",
            ratio(t["c"], t["b"]),
            TARGET,
            ratio(m["c"], m["b"]),
        ),
    ]


def main(argv: Sequence[str] | None = None) -> list[Verdict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CPU, then the GPU if any), cpu or cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch threads [torch's default]")
    args = parser.parse_args(argv)
    saved = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        print((__doc__ or "").splitlines()[0])
        print(f"{machine()}\nmedian of {args.repeats} interleaved repeat(s)")
        verdicts = [
            v
            for d in devices(args.device)
            for v in bench_device(args.model, args.samples, args.batch_size, args.repeats, d)
        ]
        print_verdicts(verdicts)
        return verdicts
    finally:
        torch.set_num_threads(saved)


if __name__ == "__main__":
    main()
