"""Every printed block of README.md and docs/, rerun: ``.venv/bin/python -m docs.regenerate [ID ...]``.

A printed block sits between two markers in a page, with the command that made it said in the text above it:

    <!-- ID:begin -->
    ```text
    … what the command printed …
    ```
    <!-- ID:end -->

:data:`BLOCKS` says, per ID, what to run. This script reruns each block (all, or the IDs named) and writes
what it prints now into every page that holds the block; tests/test_docs_blocks.py (and tests/test_readme.py
for ``demo``) rerun them and compare with the pages at the precision each number claims (tests/claims.py).
Commands run in-process through the CLI (Typer's runner), in the repository root, as the tests run them.

The language-model blocks run on a tiny **random-init** Llama built here (:func:`tiny_llama`): no pretrained
LLM can be downloaded where these pages are made. Its tokenizer is the shipped gpt2-docstrings sample's
(byte-level BPE, 4,096 tokens), and one head of layer 0 is set by hand to be an attention sink on the first
token (a trained LLM learns such heads; a random one has none), so that the sink line has something to show.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
MARKED = re.compile(r"<!-- ([\w-]+):begin -->\n```text\n(.*?)\n```\n<!-- \1:end -->", re.S)

# prompts for the language-model blocks: each starts with the tokenizer's <|endoftext|> (id 0, a BOS as
# Llama has one), and most repeat a token, as real prompts do
PROMPTS = """\
<|endoftext|>Return the value of the key, or the default value if the key is not in the dictionary.
<|endoftext|>Open the file, read the file, then close the file.
<|endoftext|>the the the the the the the the
<|endoftext|>Return a new list with the items in sorted order.
"""
LLAMA = "tiny-llama"  # the folder name the pages show (built in the work folder)
GGUF = "tiny-llama-q8.gguf"


def tiny_llama(folder: Path) -> Path:
    """A random-init Llama (d 128, 4 layers, 4 query heads reading 2 KV heads, vocabulary 4,096) saved with
    ``save_pretrained``, plus the gpt2-docstrings sample's tokenizer files and ``prompts.txt``. Head 0 of
    layer 0 is set to put its attention on token 0 (<|endoftext|>), which starts every prompt: its query is a
    constant along the slowest rotary pair (dims 15 and 31, rotated by < 1e-4 rad over 30 positions) and only
    token 0's key has a component there, so P[i, 0] ≈ 1."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    d, head_dim = 128, 32
    config = tf.LlamaConfig(
        vocab_size=4096,
        hidden_size=d,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        attention_bias=True,
        rope_theta=1e6,
        bos_token_id=0,
        eos_token_id=0,
    )
    from tests.sinking import make_sink_head

    model = tf.LlamaForCausalLM(config)
    make_sink_head(model, dim=head_dim // 2 - 1)  # the slowest rotary pair
    out = folder / LLAMA
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ROOT / "condcli" / "sample_checkpoints" / "gpt2-docstrings" / name, out / name)
    (folder / "prompts.txt").write_text(PROMPTS, encoding="utf-8")
    return out


def gguf_file(folder: Path) -> Path:
    """The tests' tiny GGUF Llama (tests/gguf_files.py), its matrices quantized to Q8_0."""
    sys.path.insert(0, str(ROOT))
    from tests.gguf_files import tiny_llama as gguf_llama
    from tests.gguf_files import write_llama

    return write_llama(gguf_llama(), folder / GGUF, "Q8_0")


def my_vit(folder: Path) -> Path:
    """my_vit.py as docs/guides/your-own-model.md shows it (the heredoc there), and its saved weights."""
    page = (DOCS / "guides" / "your-own-model.md").read_text(encoding="utf-8")
    code = page.split("cat > my_vit.py <<'PY'\n")[1].split("\nPY\n")[0]
    (folder / "my_vit.py").write_text(code + "\n", encoding="utf-8")
    return folder / "my_vit.py"


SETUPS: dict[str, Callable[[Path], object]] = {"llama": tiny_llama, "gguf": gguf_file, "my_vit": my_vit}

API = """\
import condcli

report = condcli.spectrum("vit-plain", max_samples=8)
layers = report.to_pandas()["layers"]           # pip install condcli[pandas]
plain = layers[layers.forward == "plain"]
print(plain[["index", "name", "kappa", "mu_la", "attention_entropy", "sink"]].to_string(
    index=False, float_format="{:.3g}".format))

result = condcli.check(report, rules={"max_kappa": 200, "max_mu_la": 1e12})
print(result.passed)
for c in result.checks:
    print(c.rule, c.label, f"{c.value:.3g}", "≤" if c.rule.startswith("max") else "≥", f"{c.limit:g}",
          "PASS" if c.passed else "FAIL")
"""


@dataclass(frozen=True)
class Block:
    """What one printed block runs: ``argv`` of condcli, or ``python`` code; ``setup`` names a builder of
    :data:`SETUPS` run first in the work folder; ``keep`` picks the lines shown (None: all of them)."""

    argv: tuple[str, ...] = ()
    python: str | None = None
    setup: str | None = None
    keep: Callable[[list[str]], list[str]] | None = None
    code: int = 0  # the exit code the command gives
    env: dict[str, str] = field(default_factory=dict)


def lines_from(start: str, stop: str | None = None) -> Callable[[list[str]], list[str]]:
    """The lines from the first starting with ``start`` up to (not including) one starting with ``stop``."""

    def keep(lines: list[str]) -> list[str]:
        i = next(n for n, line in enumerate(lines) if line.startswith(start))
        j = next((n for n, line in enumerate(lines[i:], i) if stop and line.startswith(stop)), len(lines))
        return lines[i:j]

    return keep


def without_notes(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("note: ")]


def first(n: int) -> Callable[[list[str]], list[str]]:
    return lambda lines: lines[:n]


def last(n: int) -> Callable[[list[str]], list[str]]:
    return lambda lines: lines[-n:]


BLOCKS: dict[str, Block] = {
    "demo": Block(("spectrum",)),
    "sweep": Block(("sweep-lambda",)),
    "sweep-tail": Block(("sweep-lambda",), keep=last(5)),
    "rank-decay": Block(("rank-decay", "--conditioned", "10")),
    "check": Block(("check", "--max-kappa", "100"), code=1),
    "check-conditioned": Block(("check", "vit-conditioned", "--max-kappa", "10", "--max-mu-la", "1e7")),
    "compare": Block(("compare", "vit-plain", "vit-conditioned", "--layers", "0,-1")),
    "models": Block(("models",)),
    "schema": Block(("schema", "spectrum"), keep=first(8)),
    "my-vit": Block(
        ("spectrum", "my_vit.py:build", "--model-arg", "depth=2"),
        setup="my_vit",
        keep=lambda lines: [*lines[:3], "…", *(ln for ln in lines if ln.startswith("note: "))],
    ),
    "qk-vit": Block(
        ("spectrum", "examples/qk_vit.py:build", "--adapter", "examples/qk_vit.toml"),
        keep=lambda lines: [
            lines[0],
            *(ln for ln in lines if ln.startswith("X = ")),
            "…",
            *(ln for ln in lines if ln.startswith(("note: adapter declared", "note: blocks.0:"))),
        ],
    ),
    "inspect": Block(("inspect", "vit-plain")),
    "python": Block(python=API),
    "llm": Block(("spectrum", LLAMA, "--text", "prompts.txt"), setup="llama", keep=without_notes),
    "llm-readme": Block(
        ("spectrum", LLAMA, "--text", "prompts.txt", "--no-conditioned"),
        setup="llama",
        keep=lambda lines: [
            *(ln for ln in lines if ln.startswith(("│ κ(X) ", "│ κ_distinct(X) "))),
            *(
                ln
                for ln in lines_from("layers (medians", "sink:")(lines)
                if not ln.startswith(("μ(LA) =", "H(P):", "≈:"))
            ),
        ],
    ),
    "llm-sink-line": Block(
        ("spectrum", LLAMA, "--text", "prompts.txt", "--no-conditioned"),
        setup="llama",
        keep=lambda lines: [ln for ln in lines if "heads are attention sinks" in ln],
    ),
    "llm-check": Block(
        (
            "check",
            LLAMA,
            "--text",
            "prompts.txt",
            "--max-kappa",
            "1e4",
            "--max-kappa-distinct",
            "100",
            "--max-sink",
            "0.9",
            "--max-kappa-table",
            "100",
        ),
        setup="llama",
        keep=without_notes,
        code=1,
    ),
    "llm-weights": Block(("weights", LLAMA), setup="llama"),
    "gguf": Block(
        ("spectrum", GGUF, "--layers", "0,-1", "--no-conditioned", "--max-samples", "4"),
        setup="gguf",
        keep=lambda lines: [ln for ln in lines if "GGUF" in ln or "dequantized" in ln or ln.startswith(GGUF)],
    ),
}


@contextmanager
def _in(folder: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(old)


def run(name: str, work: Path) -> str:
    """What block ``name`` prints now: its command run in ``work`` (after its setup there, once)."""
    block = BLOCKS[name]
    if block.setup is not None and not (work / f".{block.setup}-built").exists():
        SETUPS[block.setup](work)
        (work / f".{block.setup}-built").touch()
    if block.python is not None:
        out = io.StringIO()
        with _in(ROOT), redirect_stdout(out):
            exec(compile(block.python, f"<{name}>", "exec"), {"__name__": f"block_{name}"})
        text = out.getvalue()
    else:
        from typer.testing import CliRunner

        from condcli.cli import app

        with _in(work if block.setup else ROOT):
            result = CliRunner().invoke(app, list(block.argv), env=block.env or None)
        if result.exit_code != block.code:
            raise RuntimeError(
                f"{name}: condcli {' '.join(block.argv)} exited {result.exit_code}: {result.output}"
            )
        text = result.stdout
    # paths inside the checkout as the page shows them: relative, the same in a clone anywhere
    text = text.replace(str(ROOT) + os.sep, "").replace(str(ROOT), ".")
    lines = text.rstrip("\n").splitlines()
    return "\n".join(block.keep(lines) if block.keep else lines)


def shown(text: str) -> dict[str, list[str]]:
    """The blocks a page shows: ID → each occurrence's text."""
    found: dict[str, list[str]] = {}
    for m in MARKED.finditer(text):
        found.setdefault(m.group(1), []).append(m.group(2))
    return found


def pages_showing(name: str) -> list[Path]:
    return [p for p in PAGES if name in shown(p.read_text(encoding="utf-8"))]


def write(name: str, printed: str) -> list[Path]:
    """Put ``printed`` into every page that shows block ``name``; the pages changed."""
    changed = []
    for page in pages_showing(name):
        text = page.read_text(encoding="utf-8")
        new = MARKED.sub(
            lambda m: (
                f"<!-- {name}:begin -->\n```text\n{printed}\n```\n<!-- {name}:end -->"
                if m.group(1) == name
                else m.group(0)
            ),
            text,
        )
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


def main(argv: Sequence[str] | None = None) -> None:
    import tempfile

    names = list(argv if argv is not None else sys.argv[1:]) or list(BLOCKS)
    unknown = [n for n in names if n not in BLOCKS]
    if unknown:
        raise SystemExit(f"no such block: {', '.join(unknown)} (the blocks: {', '.join(BLOCKS)})")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if not pages_showing(name):
                print(f"{name}: shown on no page")
                continue
            changed = write(name, run(name, Path(tmp)))
            print(f"{name}: " + (", ".join(str(p.relative_to(ROOT)) for p in changed) or "up to date"))


if __name__ == "__main__":
    main()
