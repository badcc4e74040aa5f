"""Options shared by every command (SPEC §8), declared once as annotated types."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from condcli.inputs import InputSpec
from condcli.sources import LoadOptions

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

ModelArg = Annotated[
    Optional[str],
    typer.Argument(
        help="timm name, hf:ID or org/name, a local folder, a sample checkpoint name. "
        "Default: \\[tool.condcli] model in ./pyproject.toml, else the shipped sample ViT.",
        show_default=False,
    ),
]
Weights = Annotated[
    str, typer.Option("--weights", help="pretrained (download or local cache) or random (seeded init).")
]
Checkpoint = Annotated[
    Optional[Path],
    typer.Option("--checkpoint", help="A .safetensors or .pt/.pth state dict for MODEL's architecture."),
]
Seed = Annotated[int, typer.Option("--seed", help="Seed for random init and synthetic inputs.")]
Images = Annotated[
    Optional[Path], typer.Option("--images", help="A folder of images (searched recursively).")
]
Text = Annotated[Optional[Path], typer.Option("--text", help="A UTF-8 file, one sample per line.")]
MaxSamples = Annotated[Optional[int], typer.Option("--max-samples", help="Use at most this many samples.")]
BatchSize = Annotated[int, typer.Option("--batch-size", help="Samples per forward pass.")]
Device = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
Dtype = Annotated[
    Optional[str], typer.Option("--dtype", help="Run the model in float32/float64/float16/bfloat16.")
]
TrustRemoteCode = Annotated[
    bool,
    typer.Option("--trust-remote-code", help="Allow a Hugging Face model to run code from its repository."),
]
Json = Annotated[bool, typer.Option("--json", help="Print the JSON report on stdout and nothing else there.")]


def load_options(
    weights: str, checkpoint: Path | None, seed: int, device: str, dtype: str | None, trust: bool
) -> LoadOptions:
    from condcli.errors import UsageError

    if weights not in ("pretrained", "random"):
        raise UsageError(
            f"--weights {weights!r} is not known", "use --weights pretrained or --weights random"
        )
    return LoadOptions(
        weights="pretrained" if weights == "pretrained" else "random",
        checkpoint=checkpoint,
        seed=seed,
        device=device,
        dtype=dtype,
        trust_remote_code=trust,
    )


def input_spec(
    images: Path | None, text: Path | None, max_samples: int | None, batch_size: int, seed: int
) -> InputSpec:
    return InputSpec(images=images, text=text, max_samples=max_samples, batch_size=batch_size, seed=seed)


Lambda = Annotated[
    Optional[float],
    typer.Option(
        "--lambda",
        help="λ of X + λ·I_k. Default: the model's own λ if it was trained with conditioned tokens, else 10.",
        show_default=False,
    ),
]
Layers = Annotated[str, typer.Option("--layers", help="all, none, or indices such as 0,3,-1.")]
Out = Annotated[
    Optional[Path], typer.Option("--out", help="Write report.json and the plots into this folder.")
]
Format = Annotated[str, typer.Option("--format", help="Plot format: png, svg or pdf.")]


def parse_layers(text: str) -> list[int] | None:
    """--layers: "all" → None (every layer), "none" → [], "0,3,-1" → [0, 3, -1]."""
    from condcli.errors import UsageError

    value = text.strip().lower()
    if value == "all":
        return None
    if value == "none":
        return []
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise UsageError(
            f"--layers {text!r} is not all, none or a comma-separated list of integers",
            "e.g. --layers 0,3,-1",
        ) from None


def plot_format(text: str) -> str:
    from condcli.errors import UsageError

    if text not in ("png", "svg", "pdf"):
        raise UsageError(f"--format {text!r} is not known", "use --format png, svg or pdf")
    return text
