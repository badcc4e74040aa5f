"""`make bench`: how long condcli takes to start (issue 33): ``condcli --help``, ``condcli spectrum --help``
and ``condcli --version``, each a whole process (the console script beside this interpreter, else
``python -m condcli``), against ``python -c pass`` (the floor: an interpreter with site) and
``python -c "import torch"`` (what the help must not pay).

Each contender runs ``--repeats`` times in turn (interleaved, so that a busy moment of the machine falls on
all of them); the median wall time is printed with its ratio to each reference. The target is ≤ 1 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

TARGET_S = 1.0


def condcli(module: bool = False) -> list[str]:
    """The condcli a user runs: the console script beside this interpreter, else (or with ``module``)
    ``python -m condcli``, which honours PYTHONPATH (to time another checkout)."""
    script = Path(sys.executable).parent / "condcli"
    if module:
        return [sys.executable, "-m", "condcli"]
    if script.exists():
        return [str(script)]
    found = shutil.which("condcli")
    return [found] if found else [sys.executable, "-m", "condcli"]


def contenders(module: bool = False) -> dict[str, list[str]]:
    """Label → command line, the references first."""
    cli = condcli(module)
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import torch"': [sys.executable, "-c", "import torch"],
        "condcli --help": [*cli, "--help"],
        "condcli spectrum --help": [*cli, "spectrum", "--help"],
        "condcli --version": [*cli, "--version"],
    }


def wall_time(command: Sequence[str]) -> float:
    """Seconds for one whole process, output discarded (it must succeed)."""
    env = {**os.environ, "COLUMNS": "100"}
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - start


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def measure(repeats: int, module: bool = False) -> dict[str, float]:
    """Label → median wall time over ``repeats`` interleaved runs (after one warm-up run each)."""
    commands = contenders(module)
    times: dict[str, list[float]] = {label: [] for label in commands}
    for command in commands.values():  # warm the file cache: every later run reads the same files
        wall_time(command)
    for _ in range(repeats):
        for label, command in commands.items():
            times[label].append(wall_time(command))
    return {label: statistics.median(values) for label, values in times.items()}


def report(medians: dict[str, float]) -> list[str]:
    """The printed lines: each contender's median, its ratios, and whether condcli starts in ≤ 1 s."""
    floor, torch = medians["python -c pass"], medians['python -c "import torch"']
    lines = [f"{'':28} {'median s':>9} {'÷ pass':>8} {'÷ torch':>8}"]
    for label, seconds in medians.items():
        lines.append(f"{label:28} {seconds:9.3f} {ratio(seconds, floor):8.2f} {ratio(seconds, torch):8.3f}")
    slowest = max(v for k, v in medians.items() if k.startswith("condcli"))
    verdict = "yes" if slowest <= TARGET_S else "NO"
    lines.append(f"every condcli start ≤ {TARGET_S:g} s: {verdict} (slowest {slowest:.3f} s)")
    return lines


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--module", action="store_true", help="time python -m condcli (PYTHONPATH applies)")
    args = parser.parse_args(argv)
    print(f"bench_startup: {os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}")
    medians = measure(args.repeats, args.module)
    print("\n".join(report(medians)))
    return medians


if __name__ == "__main__":
    main()
