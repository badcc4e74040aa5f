"""The figure and table of the ViT λ study (``samplegen/lambda_study.json``).

python -m samplegen.lambda_figure            # docs/lambda-study.png, and the table on stdout
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from samplegen.lambda_study import RESULTS, load_results

FIGURE = Path(__file__).resolve().parent.parent / "docs" / "lambda-study.png"


def table(data: dict[str, Any]) -> str:
    """Markdown: one row per planned λ, held-out accuracy per planned seed ("—": not run yet), the mean ± the
    sample std, and the spread (max − min) over the seeds run."""
    summary = data["summary"]
    plan = data.get("planned") or {}
    seeds = sorted({*plan.get("seeds", ()), *(s for row in summary.values() for s in row["seeds"])})
    lams = sorted({*(float(lam) for lam in plan.get("lambdas", ())), *(float(lam) for lam in summary)})
    head = "| λ | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std | spread (max − min) |"
    lines = [head, "|---|" + "---|" * (len(seeds) + 2)]
    for lam in lams:
        row = summary.get(f"{lam:g}", {"seeds": [], "accuracy": [], "std": None})
        by_seed = dict(zip(row["seeds"], row["accuracy"], strict=True))
        cells = [f"{by_seed[s]:.1%}" if s in by_seed else "—" for s in seeds]
        mean = f"{row['mean']:.1%}" if row["seeds"] else "—"
        std = f" ± {row['std']:.1%}" if row["std"] is not None else ""
        spread = f"{row['spread']:.1%}" if len(row["seeds"]) > 1 else "—"
        lines.append(f"| {lam:g} | " + " | ".join(cells) + f" | {mean}{std} | {spread} |")
    return "\n".join(lines)


def figure(data: dict[str, Any], path: Path) -> None:
    """Held-out accuracy against λ: each seed a point, the mean a line, the spread (min–max) a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from condcli.plots.base import write_figures

    summary = data["summary"]
    lams = [float(lam) for lam in summary]
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    markers = {0: "o", 1: "s", 2: "^"}
    for seed in sorted({s for row in summary.values() for s in row["seeds"]}):
        xs = [float(lam) for lam, row in summary.items() if seed in row["seeds"]]
        ys = [
            100 * row["accuracy"][row["seeds"].index(seed)]
            for row in summary.values()
            if seed in row["seeds"]
        ]
        ax.scatter(xs, ys, marker=markers.get(seed, "x"), s=22, alpha=0.75, label=f"seed {seed}", zorder=3)
    means = [100 * row["mean"] for row in summary.values()]
    lows = [100 * min(row["accuracy"]) for row in summary.values()]
    highs = [100 * max(row["accuracy"]) for row in summary.values()]
    ax.errorbar(
        lams,
        means,
        yerr=[
            [m - lo for m, lo in zip(means, lows, strict=True)],
            [h - m for m, h in zip(means, highs, strict=True)],
        ],
        color="black",
        fmt="_",
        markersize=16,
        capsize=4,
        lw=1.2,
        label="mean over seeds (bar: min–max)",
        zorder=2,
    )
    plan = data.get("planned") or {}
    ticks = sorted({*lams, *(float(lam) for lam in plan.get("lambdas", ()))})
    ax.set_xticks(ticks, [f"{lam:g}" for lam in ticks])
    ax.set_xlabel("λ of X + λ·I_k during training (0: plain)")
    ax.set_ylabel("held-out accuracy (%)")
    done, missing = len(data["runs"]), len(data.get("missing", ()))
    ax.set_title(
        f"sample ViT on shapes10 (6 layers, d 96, 3 epochs)\n2,000 held-out images, {done} of "
        f"{done + missing} runs",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    fig.tight_layout()
    write_figures({path.stem: fig}, path.parent, "png")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m samplegen.lambda_figure", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=FIGURE)
    args = parser.parse_args(argv)
    data = load_results(args.results)
    if not data["runs"]:
        print(f"no runs in {args.results}: run python -m samplegen.lambda_study first", file=sys.stderr)
        return 2
    figure(data, args.out)
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
