"""`make bench`: the spectral core's fast paths against plain float64 SVD, measured side by side in one run.

Workload (issue 2): 32 random 197×768 float64 matrices (ViT-B's X shape) and a 20-λ grid 1…20.
  * sweep: naive per-λ svdvals of X + λI_k  vs  spectra.shifted_condition_number (Gram update + fallback)
  * κ:     svdvals                          vs  spectra.condition_number (Gram path + fallback)
A second workload with ill-conditioned X (prescribed κ(X) = 1e5, λ grid from 1e-3) shows what the SVD
fallback costs where the Gram path is not accurate enough. Timings are the median of interleaved repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from condcli import spectra

TARGET_SWEEP_SPEEDUP = 3.0
TARGET_AGREEMENT = 1e-10


def naive_sweep(X: torch.Tensor, lams: torch.Tensor) -> torch.Tensor:
    eye = torch.eye(X.shape[-2], X.shape[-1], dtype=X.dtype)
    out = []
    for lam in lams.tolist():
        s = torch.linalg.svdvals(X + lam * eye)
        out.append(s[..., 0] / s[..., -1])
    return torch.stack(out, -1)


def svd_kappa(X: torch.Tensor) -> torch.Tensor:
    s = torch.linalg.svdvals(X)
    kappa: torch.Tensor = s[..., 0] / s[..., -1]
    return kappa


def timed(fns: list[Callable[[], torch.Tensor]], repeats: int) -> tuple[list[float], list[torch.Tensor]]:
    """Median wall time of each function, run interleaved so machine noise hits all alike."""
    times: list[list[float]] = [[] for _ in fns]
    results: list[torch.Tensor] = [torch.empty(0)] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            results[i] = fn()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times], results


def max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / b.abs()).max())


def workloads(batch: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    N, d = 197, 768
    gaussian = torch.randn(batch, N, d, generator=g, dtype=torch.float64)
    U, _ = torch.linalg.qr(torch.randn(batch, N, N, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(batch, d, N, generator=g, dtype=torch.float64))
    sigma = torch.logspace(2, -3, N, dtype=torch.float64)  # κ(X) = 1e5, σ_1 = 100
    ill = (U * sigma) @ V.mT
    return {
        "random 197x768": (gaussian, torch.linspace(1, 20, 20, dtype=torch.float64)),
        "kappa(X)=1e5 197x768": (ill, torch.logspace(-3, 1.3, 20, dtype=torch.float64)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, "
        f"median of {args.repeats} interleaved repeats\n"
    )
    cols = ("workload", "task", "baseline s", "condcli s", "speedup", "max rel diff")
    header = "{:<22} {:<24} {:>10} {:>10} {:>8} {:>13}".format(*cols)
    print(header)
    print("-" * len(header))
    verdicts = []
    for name, (X, lams) in workloads(args.batch).items():
        (t_naive, t_sweep), (r_naive, r_sweep) = timed(
            [partial(naive_sweep, X, lams), partial(spectra.shifted_condition_number, X, lams)], args.repeats
        )
        (t_svd, t_gram), (r_svd, r_gram) = timed(
            [partial(svd_kappa, X), partial(spectra.condition_number, X)], args.repeats
        )
        for task, tb, tc, diff in [
            (f"sweep {len(lams)} λ: naive SVD", t_naive, t_sweep, max_rel(r_sweep, r_naive)),
            ("κ: svdvals vs Gram", t_svd, t_gram, max_rel(r_gram, r_svd)),
        ]:
            print(f"{name:<22} {task:<24} {tb:>10.3f} {tc:>10.3f} {tb / tc:>7.2f}x {diff:>13.1e}")
        if name.startswith("random"):
            verdicts.append((t_naive / t_sweep, max_rel(r_sweep, r_naive)))
    speedup, agree = verdicts[0]
    ok = speedup >= TARGET_SWEEP_SPEEDUP and agree <= TARGET_AGREEMENT
    print(
        f"\ntarget (random workload): sweep ≥ {TARGET_SWEEP_SPEEDUP:.0f}x faster with agreement ≤ "
        f"{TARGET_AGREEMENT:.0e}: {'MET' if ok else 'NOT MET'} ({speedup:.2f}x, {agree:.1e})"
    )


if __name__ == "__main__":
    main()
