"""The Examples at the end of each command's --help: two or three command lines that run as shown (the
sample checkpoints are names condcli ships; ``tests/test_cli_help.py`` parses every line)."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "spectrum": (
        "condcli spectrum vit-plain",
        "condcli spectrum bert-docstrings --text lines.txt --layers 0,-1 --out runs/b",
        "condcli spectrum hf:bert-base-uncased --heads --json > report.json",
    ),
    "sweep-lambda": (
        "condcli sweep-lambda vit-plain",
        "condcli sweep-lambda vit-plain --lambdas 1,2,5,10 --target-kappa 2 --out sw",
        "condcli sweep-lambda bert-docstrings --range 1 50 --steps 50 --layers 0,-1",
    ),
    "rank-decay": (
        "condcli rank-decay vit-plain",
        "condcli rank-decay vit-plain --heads --index 8",
        "condcli rank-decay gpt2-docstrings --conditioned 10 --out runs/rank",
    ),
    "check": (
        "condcli check vit-plain --max-kappa 100 --max-mu-la 50",
        "condcli check vit-plain --baseline base.json --tolerance 5% --junit ci.xml",
        "condcli check --config ci/condcli.toml --statistic max",
    ),
    "compare": (
        "condcli compare vit-plain vit-conditioned",
        "condcli compare bert-docstrings gpt2-docstrings --text lines.txt --out cmp",
    ),
    "track": (
        "condcli track runs/bert/",
        "condcli track runs/bert/checkpoint-500 runs/bert/checkpoint-900 --out trk",
    ),
    "inspect": (
        "condcli inspect vit-plain",
        "condcli inspect hf:bert-base-uncased --weights random --json",
        "condcli inspect path/to/model.py:build --model-arg depth=4",
    ),
    "models": ("condcli models", "condcli models --json"),
    "report": ("condcli report runs/report.json", "condcli report baseline.json -o baseline.html"),
    "schema": ("condcli schema spectrum", "condcli schema > condcli-report.schema.json"),
    "weights": ("condcli weights gpt2-docstrings", "condcli weights hf:gpt2 --heads --out runs/weights"),
}
"""Command name → its example command lines."""
