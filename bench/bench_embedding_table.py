"""`make bench`: the embedding table's spectrum and κ (issue 31 target: at most 2× the table's own size of
extra memory) on a random bf16 table of Llama-3.2-1B's shape, 128,256 × 2,048 (525 MB).

Each contender runs in a fresh child process: the table is made first, then the high-water mark is reset
(/proc/self/clear_refs) and the spectrum computed; the extra peak RSS over the RSS before it is divided by
the table's size. (a) the default path (``auto``: a random table is well conditioned, so the certified Gram
path, one pass); (b) the streamed QR (TSQR) the default falls back to for a table beyond the Gram path's
range (two passes there: the Gram pass, then this). Time is the wall clock of the computation alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from bench.bench_long_sequence import _status_kib, can_reset_peak
from bench.bench_spectrum import Verdict, machine, print_verdicts, ratio

ROWS, DIM = 128_256, 2_048
TARGET = 2.0  # extra memory ≤ 2× the table's size
CHILD_TAG = "BENCH_EMBEDDING_TABLE_CHILD "
LABELS = {
    "auto": "(a) default (auto: certified Gram path)",
    "tsqr": "(b) streamed QR (TSQR), the fallback",
}


def child(rows: int, dim: int, method: str) -> dict[str, float]:
    """Make the table, reset the high-water mark, compute; extra peak and table size in MiB, seconds."""
    from condcli.analysis.embedding_table import spectrum_report, tensor_rows

    table = (torch.randn(rows, dim, generator=torch.Generator().manual_seed(0)) * 0.02).to(torch.bfloat16)
    size = table.numel() * table.element_size() / 2**20
    reset = can_reset_peak()  # resets VmHWM where the kernel allows it
    start = _status_kib("VmRSS:")
    t0 = time.perf_counter()
    report = spectrum_report(tensor_rows(table), (rows, dim), "E", method)  # type: ignore[arg-type]
    seconds = time.perf_counter() - t0
    extra = (_status_kib("VmHWM:") - start) / 1024 if reset else float("nan")
    return {"seconds": seconds, "extra_mib": extra, "table_mib": size, "kappa": report.kappa}


def run_child(rows: int, dim: int, method: str) -> dict[str, float]:
    cmd = [sys.executable, "-m", "bench.bench_embedding_table", "--child", method]
    cmd += ["--rows", str(rows), "--dim", str(dim)]
    done = subprocess.run(
        cmd, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, check=False
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(CHILD_TAG)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"embedding-table child ({method}) failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    result: dict[str, float] = json.loads(lines[-1].removeprefix(CHILD_TAG))
    return result


def main(argv: Sequence[str] | None = None) -> list[Verdict]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--dim", type=int, default=DIM)
    parser.add_argument("--child", choices=tuple(LABELS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(CHILD_TAG + json.dumps(child(args.rows, args.dim, args.child)), flush=True)
        return []
    print(f"embedding table: random bf16 {args.rows:,} × {args.dim:,}; {machine()}")
    header = (
        f"{'contender':<44} {'seconds':>8} {'extra peak MiB':>15} {'table MiB':>10} {'extra / table':>14}"
    )
    print(header)
    print("-" * len(header))
    verdicts = []
    for method, label in LABELS.items():
        got = run_child(args.rows, args.dim, method)
        share = ratio(got["extra_mib"], got["table_mib"])
        print(
            f"{label:<44} {got['seconds']:>8.2f} {got['extra_mib']:>15.0f} {got['table_mib']:>10.0f} "
            f"{share:>13.2f}x"
        )
        verdicts.append(Verdict(f"{label}: extra memory / table size", share, TARGET))
    print_verdicts(verdicts)
    return verdicts


if __name__ == "__main__":
    main()
