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

The language-model blocks run on the shipped LLM sample, ``llama-docstrings`` (a small Llama-style decoder
trained on docstrings, condcli/sample_checkpoints/), with its own prompts named as a wheel user names them,
``--text llama-docstrings/prompts.txt``, from an empty folder: nothing here builds them.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

from condcli.loading.samples import samples_dir

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
MARKED = re.compile(r"<!-- ([\w-]+):begin -->\n```text\n(.*?)\n```\n<!-- \1:end -->", re.S)

LLAMA = "llama-docstrings"  # the shipped LLM sample
PROMPTS_FILE = f"{LLAMA}/prompts.txt"  # a file of the shipped sample: `--text` reads it so from any folder
PROMPTS = (samples_dir() / PROMPTS_FILE).read_text(encoding="utf-8")
GGUF = "tiny-llama-q8.gguf"
TERMINAL = {
    "COLUMNS": "100"
}  # the blocks show what a 100-column terminal shows (tables fitted, text wrapped)


def empty(folder: Path) -> None:
    """Nothing: the command runs in an empty folder, as after ``pip install condcli``."""


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


SETUPS: dict[str, Callable[[Path], object]] = {"empty": empty, "gguf": gguf_file, "my_vit": my_vit}

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
    "check-conditioned": Block(("check", "vit-conditioned", "--max-kappa", "30", "--max-mu-la", "1e10")),
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
    "llm": Block(("spectrum", LLAMA, "--text", PROMPTS_FILE), setup="empty", keep=without_notes),
    "llm-readme": Block(
        ("spectrum", LLAMA, "--text", PROMPTS_FILE, "--no-conditioned"),
        setup="empty",
        keep=lambda lines: [
            *(ln for ln in lines if ln.startswith(("│ κ(X) ", "│ κ_distinct(X) "))),
            *(ln for ln in lines if ln.startswith(("embedding table E", "output head"))),
            *(
                ln
                for ln in lines_from("layers (medians", "sink:")(lines)
                if not ln.startswith(("μ(LA) =", "H(P):", "≈:"))
            ),
        ],
    ),
    "llm-check": Block(
        (
            "check",
            LLAMA,
            "--text",
            PROMPTS_FILE,
            "--max-kappa",
            "1e4",
            "--max-kappa-distinct",
            "100",
            "--max-kappa-distinct-layer",
            "1e4",
            "--max-sink",
            "0.5",
            "--max-kappa-table",
            "100",
        ),
        setup="empty",
        keep=without_notes,
        code=1,
    ),
    "llm-weights": Block(("weights", LLAMA), setup="empty"),
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
            result = CliRunner().invoke(app, list(block.argv), env={**TERMINAL, **(block.env or {})})
        if result.exit_code != block.code:
            raise RuntimeError(
                f"{name}: condcli {' '.join(block.argv)} exited {result.exit_code}: {result.output}"
            )
        text = result.stdout
    # paths inside the checkout as the page shows them: relative, the same in a clone anywhere
    text = text.replace(str(ROOT) + os.sep, "").replace(str(ROOT), ".")
    lines = [line.rstrip() for line in text.rstrip("\n").splitlines()]  # a terminal shows no trailing spaces
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
