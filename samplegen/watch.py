"""The README's "watch it during training" figure: the two sample ViT recipes retrained briefly, plain and
conditioned, with :class:`condcli.monitor.Monitor` measuring every few steps.

``python -m samplegen.watch [--epochs 1] [--every 6] [--out docs/watch-training.png]`` (about 3 minutes on
2 cores). Both runs share the seed, initial weights, data, order and schedule (samplegen.train_vit); the
probe is the first 16 held-out images, the same at every step. The figure is drawn from the logged values
only; ``--json FILE`` also writes them, and ``--checkpoints DIR`` saves the plain run's checkpoints, on whose
``condcli track DIR --images <the 16 probe images>`` gives the values the Monitor logged at those steps.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from condcli.adapters import condition_model
from condcli.monitor import Monitor
from samplegen import build, shapes, train_vit
from samplegen.common import deterministic, fit

PROBE = 16  # held-out images measured at every step


def run(
    recipe: train_vit.VitRecipe, every: int, probe: torch.Tensor, save: tuple[Path, int] | None = None
) -> tuple[list[int], list[dict[str, float]]]:
    """Train one recipe; the Monitor's values at step 0 and every ``every`` optimizer steps (and the last).

    ``save`` (folder, n): also save the model as ``folder/checkpoint-<step>`` every n steps and at the
    last (for ``condcli track``)."""
    deterministic(recipe.seed)
    model = train_vit.create(recipe)
    if recipe.lam is not None:
        condition_model(model, lam=recipe.lam)
    monitor = Monitor(model, max_samples=PROBE)
    images, labels = shapes.make_shapes(recipe.train_size, recipe.train_seed)
    x, y = torch.from_numpy(shapes.normalise(images)), torch.from_numpy(labels)
    total = recipe.epochs * math.ceil(recipe.train_size / recipe.batch_size)
    steps, values = [0], [monitor.measure(probe) | {"loss": math.nan}]

    def on_step(step: int, loss: float) -> None:
        if step % every == 0 or step == total:
            steps.append(step)
            values.append(monitor.measure(probe) | {"loss": loss})
        if save is not None and (step % save[1] == 0 or step == total):
            train_vit.save(model, save[0] / f"checkpoint-{step}")

    def batch_loss(idx: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return F.cross_entropy(model(x[idx]), y[idx])

    fit(model, len(x), batch_loss, recipe, print, on_step)
    return steps, values


def figure(runs: dict[str, tuple[list[int], list[dict[str, float]]]], depth: int, path: Path) -> None:
    """κ of what enters the blocks, μ(LA) of the first and last layer, H(P) and the loss, against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.9), constrained_layout=True)
    colors = {"plain": "#444444", "conditioned": "#1f77b4"}
    last = depth - 1
    for name, (steps, values) in runs.items():
        c = colors[name]

        def col(key: str, values: list[dict[str, float]] = values) -> list[float]:
            return [v.get(key, math.nan) for v in values]

        fed = "condcli/kappa_x_conditioned" if name == "conditioned" else "condcli/kappa_x"
        axes[0].plot(steps, col(fed), color=c, label=f"{name}: κ of the tokens fed to the blocks")
        if name == "conditioned":
            axes[0].plot(
                steps, col("condcli/kappa_x"), color=c, ls=":", label="conditioned: κ(X) before + λI"
            )
        axes[1].plot(steps, col("condcli/layer_0/mu_la"), color=c, label=f"{name}: layer 0")
        axes[1].plot(
            steps, col(f"condcli/layer_{last}/mu_la"), color=c, ls="--", label=f"{name}: layer {last}"
        )
        axes[2].plot(steps, col("condcli/layer_0/attention_entropy"), color=c, label=f"{name}: layer 0")
        axes[2].plot(
            steps,
            col(f"condcli/layer_{last}/attention_entropy"),
            color=c,
            ls="--",
            label=f"{name}: layer {last}",
        )
        axes[3].plot(steps[1:], col("loss")[1:], color=c, label=name)
    titles = (
        "κ(X) (median, 16 held-out images)",
        "μ(LA) = κ(W_Q)κ(W_K)κ(W_V)κ(A)³",
        "H(P), normalised",
        "train loss",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--every", type=int, default=6, help="measure every N optimizer steps")
    parser.add_argument("--out", type=Path, default=Path("docs/watch-training.png"))
    parser.add_argument("--train-size", type=int, default=train_vit.VitRecipe.train_size)
    parser.add_argument("--json", type=Path, default=None, help="also write the logged values here")
    parser.add_argument(
        "--checkpoints", type=Path, default=None, help="save the plain run's checkpoints here"
    )
    parser.add_argument("--save-every", type=int, default=48, help="steps between saved checkpoints")
    args = parser.parse_args(argv)
    base = replace(train_vit.VitRecipe(), epochs=args.epochs, train_size=args.train_size)
    pixels, _, _ = train_vit.heldout(base)
    probe = pixels[:PROBE]
    runs: dict[str, Any] = {}
    for name, lam in (("plain", None), ("conditioned", build.CONDITIONED_LAMBDA)):
        print(f"{name} run")
        save = (args.checkpoints, args.save_every) if args.checkpoints is not None and lam is None else None
        runs[name] = run(replace(base, lam=lam), args.every, probe, save)
    figure(runs, base.depth, args.out)
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=1, allow_nan=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
