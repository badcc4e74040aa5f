"""The ViT λ study: the sample recipe trained at several λ and seeds, scored on the held-out shapes10 set.

Every run is ``train_vit.train`` with the sample recipe, only ``lam`` and ``seed`` changed (λ = 0 is the
plain recipe, ``lam=None``). Held-out accuracy is ``train_vit.evaluate`` on the model as trained (with
the shift for λ > 0, as condcli re-applies it on load). Results are written to a JSON file after every
run, so an interrupted study resumes where it stopped. The seed-0 runs are built as whole sample folders by
``build.build_vit`` (saved, loaded back through condcli, scored again) under ``--keep`` (not committed):
``lambda-L/vit-plain`` or ``lambda-L/vit-conditioned``, exactly what ``samplegen.build`` would ship at that
λ; the sha256 of their weights is recorded, so a rerun of a shipped sample shows it is bit-identical.
Several workers may run at once (each takes the next run nobody holds, under ``--keep``/runs).

    python -m samplegen.lambda_study                 # λ ∈ {0, 1, 3, 10, 12}, seeds 0, 1, 2
    python -m samplegen.lambda_study --reuse-shipped # the same, seed 0 of λ 0 and 10 from the samples
    python -m samplegen.lambda_study --lambdas 0 10 --seeds 0
    python -m samplegen.lambda_study --collect       # the results file from the runs done so far
    python -m samplegen.lambda_figure                # docs/lambda-study.png and the table
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from samplegen import build, train_vit
from samplegen.common import versions

RESULTS = Path(__file__).resolve().parent / "lambda_study.json"
KEEP = Path("/tmp/condcli-lambda-study")  # the seed-0 sample folders
LAMBDAS = (0.0, 1.0, 3.0, 10.0, 12.0)  # 12: what `condcli sweep-lambda vit-plain` recommends (κ ≤ 2)
MAIN = (0.0, 12.0, 10.0)  # plain, recommended, shipped before the study
SEEDS = (0, 1, 2)


def _key(lam: float, seed: int) -> str:
    return f"lambda={lam:g} seed={seed}"


def order(lambdas: Sequence[float], seeds: Sequence[int]) -> list[tuple[float, int]]:
    """The runs in the order they are taken: λ = 0, the recommended 12 and the shipped 10 at every seed first
    (the comparison the samples make), then the others; within each group, seed by seed."""
    main = [lam for lam in MAIN if lam in lambdas]
    rest = [lam for lam in lambdas if lam not in MAIN]
    return [(lam, seed) for group in (main, rest) for seed in seeds for lam in group]


def load_results(path: Path) -> dict[str, Any]:
    """The results file, or an empty study."""
    if path.is_file():
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    return {"runs": {}}


def summarise(runs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per λ: the accuracies by seed, their mean, the spread (max − min) and the sample std."""
    by_lam: dict[str, dict[int, float]] = {}
    for run in runs.values():
        by_lam.setdefault(f"{run['lambda']:g}", {})[run["seed"]] = run["accuracy"]
    out = {}
    for lam, accs in sorted(by_lam.items(), key=lambda kv: float(kv[0])):
        values = [accs[s] for s in sorted(accs)]
        out[lam] = {
            "seeds": sorted(accs),
            "accuracy": values,
            "mean": statistics.fmean(values),
            "spread": max(values) - min(values),
            "std": statistics.stdev(values) if len(values) > 1 else None,
        }
    return out


def _write(path: Path, data: dict[str, Any]) -> None:
    data["summary"] = summarise(data["runs"])
    plan = data.get("planned") or {"lambdas": list(LAMBDAS), "seeds": list(SEEDS)}
    data["missing"] = [
        key
        for lam, seed in order(plan["lambdas"], plan["seeds"])
        if (key := _key(lam, seed)) not in data["runs"]
    ]
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _run(recipe: train_vit.VitRecipe, heldout: tuple[Any, Any], keep: Path) -> dict[str, Any]:
    """One run's held-out scores; seed 0 is built as a whole sample folder under ``keep``."""

    def log(line: str) -> None:
        print(line, flush=True)

    if recipe.seed != 0:
        _, info = train_vit.train(recipe, heldout, log)
        scores = info["heldout_in_memory"]
        return {
            "accuracy": scores["accuracy"],
            "loss": scores["loss"],
            "train_loss_per_epoch": info["train_loss_per_epoch"],
        }
    name = "vit-plain" if recipe.lam is None else "vit-conditioned"
    out = keep / f"lambda-{recipe.lam or 0:g}"
    meta = build.build_vit(name, recipe, out, log)
    return {
        "accuracy": meta["heldout"]["value"],
        "loss": meta["heldout"]["loss"],
        "train_loss_per_epoch": meta["training"]["train_loss_per_epoch"],
        "weights_sha256": build._sha(out / name / build.WEIGHTS),
    }


SHIPPED = {0.0: "vit-plain", build.CONDITIONED_LAMBDA: "vit-conditioned"}  # the seed-0 runs of these λ


def reuse_shipped(runs: Path, base: train_vit.VitRecipe) -> list[str]:
    """The seed-0 runs of the shipped λ (:data:`SHIPPED`) taken from the shipped samples, where the recipe
    their metadata records is this study's (so they are those runs; tests/test_samples.py reproduces their
    held-out accuracy from the shipped weights with independent code); what was done, one line per sample."""
    done = []
    for lam, name in SHIPPED.items():
        target = runs / f"{_key(lam, 0)}.json"
        meta = json.loads((build.ROOT / name / "metadata.json").read_text(encoding="utf-8"))
        recipe = asdict(replace(base, lam=None if lam == 0 else lam, seed=0))
        if meta["training"]["recipe"] != recipe or meta["seed"] != 0:
            done.append(f"{name}: trained with another recipe, not reused")
            continue
        if target.exists():
            done.append(f"{name}: λ {lam:g}, seed 0 is already there")
            continue
        result = {
            "lambda": lam,
            "seed": 0,
            "accuracy": meta["heldout"]["value"],
            "loss": meta["heldout"]["loss"],
            "train_loss_per_epoch": meta["training"]["train_loss_per_epoch"],
            "weights_sha256": build._sha(build.ROOT / name / build.WEIGHTS),
            "seconds": meta["training"]["seconds"],
            "versions": meta["versions"],
            "source": f"the shipped {name} (its metadata.json records this recipe at seed 0), not retrained "
            "here; tests/test_samples.py reproduces its held-out accuracy from the shipped weights",
            "shipped_as": name,
        }
        target.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        done.append(f"{name}: λ {lam:g}, seed 0 taken from the shipped sample")
    return done


def _claim(path: Path) -> bool:
    """Take a run: True for the one worker that creates ``path`` (it holds the worker's pid), or that finds
    the pid in it no longer running (a worker stopped before it finished the run)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        try:
            os.kill(int(path.read_text() or "0"), 0)
            return False  # its worker is still at it
        except (ValueError, ProcessLookupError):
            path.write_text(str(os.getpid()))
            return True
        except PermissionError:
            return False
    with os.fdopen(fd, "w") as fh:
        fh.write(str(os.getpid()))
    return True


def _collect(runs: Path, data: dict[str, Any], out: Path) -> None:
    """Every finished run (this worker's and the others') into ``data``, written to ``out``."""
    for file in sorted(runs.glob("*.json")):
        data["runs"][file.stem] = json.loads(file.read_text(encoding="utf-8"))
    data["runs"] = dict(sorted(data["runs"].items(), key=lambda kv: (kv[1]["lambda"], kv[1]["seed"])))
    _write(out, data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m samplegen.lambda_study", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--lambdas", nargs="+", type=float, default=list(LAMBDAS))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results JSON (resumed if present)")
    parser.add_argument("--keep", type=Path, default=KEEP, help="where the seed-0 sample folders go")
    parser.add_argument(
        "--reuse-shipped",
        action="store_true",
        help="take λ 0 and 10, seed 0 from vit-plain and vit-conditioned where they have this recipe",
    )
    parser.add_argument("--collect", action="store_true", help="train nothing: write the runs done so far")
    args = parser.parse_args(argv)
    base = train_vit.VitRecipe()
    data = load_results(args.out)
    data |= {
        "what": "held-out shapes10 accuracy of the sample ViT recipe at each λ (X + λ·I_k after positional "
        "encoding; λ = 0 is the plain recipe) and seed (initial weights and batch order)",
        "made_by": "python -m samplegen.lambda_study",
        "recipe": asdict(replace(base, lam=None, seed=0)) | {"lam": "varied", "seed": "varied"},
        "versions": versions(),
        "planned": {"lambdas": args.lambdas, "seeds": args.seeds},
    }
    px, py, digest = train_vit.heldout(base)
    data["heldout"] = {"count": base.heldout_size, "seed": base.heldout_seed, "sha256": digest}
    runs = args.keep / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    if args.reuse_shipped:
        print("\n".join(reuse_shipped(runs, base)), flush=True)
    for lam, seed in [] if args.collect else order(args.lambdas, args.seeds):
        key = _key(lam, seed)
        if (runs / f"{key}.json").exists() or not _claim(runs / f"{key}.claim"):
            continue  # done, or taken by another worker
        print(f"{key}: training", flush=True)
        recipe = replace(base, lam=None if lam == 0 else lam, seed=seed)
        t = time.perf_counter()
        result = {"lambda": lam, "seed": seed} | _run(recipe, (px, py), args.keep)
        result |= {"seconds": round(time.perf_counter() - t, 1), "versions": versions()}
        (runs / f"{key}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"{key}: held-out accuracy {result['accuracy']:.1%}", flush=True)
        _collect(runs, data, args.out)
    _collect(runs, data, args.out)
    for lam, s in data["summary"].items():
        print(f"λ {lam:>4}: " + " ".join(f"{a:.1%}" for a in s["accuracy"]) + f"  mean {s['mean']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
