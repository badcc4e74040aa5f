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
        "Default: [tool.condcli] model in ./pyproject.toml, else the shipped sample ViT.",
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
