"""``condcli models``: the shipped sample checkpoints — what each is, its held-out metric, its size."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from condcli.cli import options as o
from condcli.cli.main import command

if TYPE_CHECKING:
    from condcli.loading.samples import SampleInfo


def _metric(s: SampleInfo) -> str:
    if s.value is None:
        return "—"
    if s.metric == "accuracy":
        return f"{s.value:.1%} accuracy"
    if s.metric == "loss (nats/token)":
        return f"loss {s.value:.3f} nats/token"
    return f"{s.metric} {s.value:.4g}"


def pair_story(samples: list[SampleInfo]) -> str | None:
    """One plain sentence on what the ViT pair shows, from their held-out accuracies (None without both)."""
    by_name = {s.name: s for s in samples}
    plain, cond = by_name.get("vit-plain"), by_name.get("vit-conditioned")
    if (
        plain is None
        or cond is None
        or plain.value is None
        or cond.value is None
        or cond.conditioning is None
    ):
        return None
    points = 100 * (cond.value - plain.value)
    verdict = "conditioning did not help at this scale" if points <= 0 else "conditioning helped in this run"
    return (
        f"vit-plain and vit-conditioned are one small ViT recipe (shapes10, seed 0) trained without and with "
        f"{cond.conditioning}: held-out accuracy {plain.value:.1%} vs {cond.value:.1%} "
        f"({points:+.1f} points), so {verdict}. They show what the shift does to κ(X) and to attention in a "
        "trained model, not the paper's ImageNet gain; the λ study over seeds: the project's docs/samples.md."
    )


@command("models")
def models_command(as_json: o.Json = False) -> None:
    """List the shipped sample checkpoints (usable as MODEL by name, offline)."""
    from condcli.cli.tables import Col, fitted, stdout_console
    from condcli.loading.project_config import DEFAULT_SAMPLE
    from condcli.loading.samples import list_samples, restore_hint, samples_dir
    from condcli.reports.envelope import envelope

    samples = list_samples()
    if as_json:
        report = {
            **envelope("models"),
            "samples_dir": str(samples_dir()),
            "samples": [s.to_json() for s in samples],
        }
        print(json.dumps(report, indent=2))
        return
    out = stdout_console(160)
    if not samples:
        out.print(f"no sample checkpoints in {samples_dir()} — {restore_hint()}")
        return
    cols = [
        Col("name", [s.name for s in samples]),
        Col("architecture", [s.architecture for s in samples], wrap=True),
        Col("task", [s.task for s in samples], wrap=True, rank=1),
        Col("held-out", [_metric(s) for s in samples], wrap=True),
        Col("conditioning", [s.conditioning or "—" for s in samples], wrap=True),
        Col("size", [f"{s.size_bytes / 1e6:.1f} MB" for s in samples], wrap=True),
    ]
    out.print(fitted(cols, out.width)[0])
    story = pair_story(samples)
    if story is not None:
        out.print(story)
    names = [s.name for s in samples]
    example = DEFAULT_SAMPLE if DEFAULT_SAMPLE in names else names[0]
    out.print(
        f"in {samples_dir()}; use a name as MODEL (e.g. 'condcli inspect {example}')."
        " MODEL may also be a timm name, a Hugging Face id or a model folder."
    )
