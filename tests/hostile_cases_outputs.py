"""Hostile-input cases: outputs (run by tests/test_hostile.py through tests/hostile_harness.py).

Where condcli writes: ``--junit`` and ``--out`` never replace a FIFO or a device, never overwrite (or write
inside) what the run reads, and a path that cannot be written is refused before any work, in one line,
creating nothing. Every case works in its own folder; the one that names a device reaches it only through
a symlink in that folder and watches it (condcli never writes through a symlink: ``os.replace`` replaces
the link itself), so even a regression could not touch the system's /dev/null.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from tests.hostile_harness import Hostile

FAST = ("--max-samples", "2", "--batch-size", "2")
CHECK = ("check", *FAST, "--max-kappa", "1e9")
SPECTRUM = ("spectrum", *FAST)
SAMPLE = Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / "vit-plain"
LONG = "n" * 256  # one byte over NAME_MAX
DEEP = "/".join(["d" * 200] * 25)  # every name short enough, the path over PATH_MAX (4096 bytes)


def files(content: dict[str, str]) -> Callable[[Path], None]:
    """A setup making ``content`` (path → its text; "dir/" for a folder, "->target" for a symlink,
    "fifo" for a FIFO, "=name" for a hard link to name)."""

    def make(tmp: Path) -> None:
        for name, text in content.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if text == "dir/":
                path.mkdir()
            elif text.startswith("->"):
                path.symlink_to(text[2:])
            elif text == "fifo":
                os.mkfifo(path)
            elif text.startswith("="):
                os.link(tmp / text[1:], path)
            else:  # a lone surrogate stands for a byte that is not UTF-8 ("\udcff" → 0xff)
                path.write_bytes(text.encode("utf-8", "surrogateescape"))

    return make


def newline_file(tmp: Path) -> None:
    (tmp / "a\nb").write_text("a file")


def report_json(command: str = "spectrum", version: object = 1) -> str:
    """The smallest condcli report of ``command`` (docs/math.md#json's envelope and sections, no later
    keys)."""
    return json.dumps(
        {
            "schema_version": version,
            "tool": {"name": "condcli", "version": "0.0.1"},
            "command": command,
            "model": {"spec": "m", "family": "f", "source": "local", "weights": "file", "num_layers": 1},
            "inputs": {"kind": "synthetic", "count": 2, "tokens": 4, "dim": 3},
            "settings": {"lambda": 10, "dtype": "float32", "device": "cpu", "seed": 0},
            "embedding": {"where": "x", "kappa": {"median": 5.0, "per_sample": [4.0, 6.0]}},
            "layers": [{"index": 0, "name": "blocks.0", "kappa": {"median": 7.0}}],
        }
    )


R = {"r.json": report_json()}  # a good report beside the bad output
# condcli report FILE.json [-o FILE.html]: bad input is one line, exit 2, and no page left behind; an
# earlier, smaller report renders (the page says what it lacks). (id, argv after "report", exit, says, files)
REPORT_CASES: list[tuple[str, tuple[str, ...], int, str, dict[str, str]]] = [
    ("missing", ("nope.json",), 2, "FILE nope.json does not exist", {}),
    ("empty-name", ("",), 2, "it is empty", {}),
    ("not-json", ("r.json",), 2, "invalid JSON at line 1", {"r.json": "<html>"}),
    ("empty-file", ("r.json",), 2, "invalid JSON", {"r.json": ""}),
    ("not-utf8", ("r.json",), 2, "not UTF-8", {"r.json": "\udcff{}"}),
    ("deep", ("r.json",), 2, "nested too deeply", {"r.json": "[" * 100_000}),
    ("list", ("r.json",), 2, "not a JSON object", {"r.json": "[1, 2]"}),
    ("not-condcli", ("r.json",), 2, "not a condcli report", {"r.json": '{"command": "spectrum"}'}),
    (
        "other-tool",
        ("r.json",),
        2,
        "not a condcli report",
        {"r.json": report_json().replace("condcli", "ww")},
    ),
    ("models", ("r.json",), 2, "'models', which has no page", {"r.json": report_json("models")}),
    ("unknown-command", ("r.json",), 2, "'bench', which has no page", {"r.json": report_json("bench")}),
    ("no-command", ("r.json",), 2, "no command, which has no page", {"r.json": report_json(None)}),
    ("newer-schema", ("r.json",), 2, "schema_version 2, newer", {"r.json": report_json(version=2)}),
    ("bool-schema", ("r.json",), 2, "not a report version", {"r.json": report_json(version=True)}),
    ("string-schema", ("r.json",), 2, "not a report version", {"r.json": report_json(version="1")}),
    ("fifo-input", ("f.json",), 2, "is a FIFO, not a file", {"f.json": "fifo"}),
    ("folder-input", ("d.json",), 2, "is a folder, not a file", {"d.json": "dir/"}),
    ("device-input", ("z.json",), 2, "is a device, not a file", {"z.json": "->/dev/zero"}),
    ("o-is-input", ("r.json", "-o", "r.json"), 2, "would overwrite FILE", R),
    ("o-is-input-relative", ("r.json", "-o", "d/../r.json"), 2, "would overwrite FILE", {**R, "d": "dir/"}),
    (
        "o-hard-link-of-input",
        ("r.json", "-o", "h.html"),
        2,
        "would overwrite FILE",
        {**R, "h.html": "=r.json"},
    ),
    (
        "o-symlink-to-input",
        ("r.json", "-o", "l.html"),
        2,
        "would overwrite FILE",
        {**R, "l.html": "->r.json"},
    ),
    (
        "default-is-input",
        ("r.json",),
        2,
        "would overwrite FILE",
        {"r.html": report_json(), "r.json": "->r.html"},
    ),
    ("o-fifo", ("r.json", "-o", "f.html"), 2, "is a FIFO", {**R, "f.html": "fifo"}),
    ("o-folder", ("r.json", "-o", "d"), 2, "is a folder", {**R, "d": "dir/"}),
    ("o-link-to-devnull", ("r.json", "-o", "n.html"), 2, "is a device", {**R, "n.html": "->" + os.devnull}),
    ("o-below-file", ("r.json", "-o", "f.txt/r.html"), 2, "is a file, not a folder", {**R, "f.txt": "x"}),
    (
        "o-dangling-link",
        ("r.json", "-o", "r.html"),
        2,
        "which does not exist",
        {**R, "r.html": "->gone/r.html"},
    ),
    ("o-proc", ("r.json", "-o", "/proc/condcli.html"), 2, "cannot write in /proc", R),
    ("o-empty", ("r.json", "-o", ""), 2, "it is empty", R),
    ("o-name-max", ("r.json", "-o", f"{LONG}.html"), 2, "more than the 255", R),
    ("earliest-schema", ("r.json",), 0, "wrote r.html", R),
    ("o-new-folder", ("r.json", "-o", "a/b/p.html"), 0, "wrote a/b/p.html", R),
]


CASES: list[Hostile] = [
    # 1. only regular files: a FIFO or a device stays what it is
    Hostile("out-junit-fifo", (*CHECK, "--junit", "j.xml"), 2, "is a FIFO", files({"j.xml": "fifo"})),
    Hostile(
        "out-junit-link-to-devnull",
        (*CHECK, "--junit", "null.xml"),
        2,
        "is a device",
        files({"null.xml": "->" + os.devnull}),
        watch=(os.devnull,),
    ),
    Hostile("out-junit-folder", (*CHECK, "--junit", "d"), 2, "is a folder", files({"d": "dir/"})),
    Hostile("out-out-fifo", (*SPECTRUM, "--out", "f"), 2, "is a FIFO, not a folder", files({"f": "fifo"})),
    Hostile(
        "out-out-report-fifo",
        (*SPECTRUM, "--out", "o"),
        2,
        "report.json there is a FIFO",
        files({"o/report.json": "fifo"}),
    ),
    Hostile(
        "out-out-plot-folder",
        (*SPECTRUM, "--out", "o"),
        2,
        "layers.png there is a folder",
        files({"o/layers.png": "dir/"}),
    ),
    Hostile(
        "out-out-file", (*SPECTRUM, "--out", "f.txt"), 2, "is a file, not a folder", files({"f.txt": "x"})
    ),
    Hostile(
        "out-out-below-file",
        (*SPECTRUM, "--out", "f.txt/run"),
        2,
        "is a file, not a folder",
        files({"f.txt": "x"}),
    ),
    # 2. never over what the run reads
    Hostile(
        "out-junit-is-baseline",
        ("check", *FAST, "--baseline", "b.json", "--junit", "b.json"),
        2,
        "would overwrite --baseline",
        files({"b.json": "{}"}),
    ),
    Hostile(
        "out-junit-is-baseline-relative",
        ("check", *FAST, "--baseline", "{tmp}/b.json", "--junit", "sub/../b.json"),
        2,
        "would overwrite --baseline",
        files({"b.json": "{}", "sub": "dir/"}),
    ),
    Hostile(
        "out-junit-hard-link-of-baseline",
        ("check", *FAST, "--baseline", "b.json", "--junit", "h.json"),
        2,
        "would overwrite --baseline",
        files({"b.json": "{}", "h.json": "=b.json"}),
    ),
    Hostile(
        "out-junit-symlink-to-checkpoint",
        (*CHECK, "--checkpoint", "w.pt", "--junit", "j.xml"),
        2,
        "would overwrite --checkpoint",
        files({"w.pt": "weights", "j.xml": "->w.pt"}),
    ),
    Hostile(
        "out-junit-pyproject-absent", (*CHECK, "--junit", "pyproject.toml"), 2, "would overwrite the config"
    ),
    Hostile(
        "out-junit-pyproject",
        ("check", *FAST, "--junit", "pyproject.toml"),
        2,
        "would overwrite the config",
        files({"pyproject.toml": "[tool.condcli.check]\nmax_kappa = 1e9\n"}),
    ),
    Hostile(
        "out-junit-config",
        ("check", *FAST, "--config", "c.toml", "--junit", "./c.toml"),
        2,
        "would overwrite --config",
        files({"c.toml": "[tool.condcli.check]\nmax_kappa = 1e9\n"}),
    ),
    Hostile(
        "out-junit-text",
        (*CHECK, "--text", "t.txt", "--junit", "t.txt"),
        2,
        "would overwrite --text",
        files({"t.txt": "a\n"}),
    ),
    Hostile(
        "out-junit-adapter",
        (*CHECK, "--adapter", "a.toml", "--junit", "a.toml"),
        2,
        "would overwrite --adapter",
        files({"a.toml": "x"}),
    ),
    Hostile(
        "out-junit-in-images",
        (*CHECK, "--images", "im", "--junit", "im/j.xml"),
        2,
        "lies inside --images",
        files({"im/a.png": "x"}),
    ),
    Hostile(
        "out-junit-in-model-folder",
        ("check", "m", *FAST, "--max-kappa", "1e9", "--junit", "m/config.json"),
        2,
        "would overwrite MODEL",
        files({"m/config.json": "{}"}),
    ),
    Hostile(
        "out-junit-model-file",
        ("check", "net.py:build", *FAST, "--max-kappa", "1e9", "--junit", "net.py"),
        2,
        "would overwrite MODEL",
        files({"net.py": "def build():\n    raise SystemExit('never run')\n"}),
    ),
    Hostile(
        "out-out-overwrites-text",
        (*SPECTRUM, "--text", "report.json", "--out", "."),
        2,
        "writing report.json there would overwrite --text",
        files({"report.json": "my own text\n"}),
    ),
    Hostile(
        "out-out-in-images",
        (*SPECTRUM, "--images", "im", "--out", "im/run"),
        2,
        "lies inside --images",
        files({"im": "dir/"}),
    ),
    Hostile(
        "out-out-is-images",
        ("sweep-lambda", *FAST, "--images", "im", "--out", "im"),
        2,
        "lies inside --images",
        files({"im": "dir/"}),
    ),
    Hostile(
        "out-out-in-model-subfolder",
        ("rank-decay", "m", *FAST, "--out", "m/tokenizer"),
        2,
        "lies inside MODEL",
        files({"m/config.json": "{}", "m/tokenizer/vocab.txt": "x"}),
    ),
    Hostile(
        "out-out-is-sample-folder",
        ("rank-decay", "vit-plain", *FAST, "--out", str(SAMPLE)),
        2,
        "lies inside MODEL",
        watch=(str(SAMPLE),),
    ),
    Hostile(
        "out-compare-out-over-checkpoint",
        (
            "compare",
            "vit-plain",
            "vit-plain",
            *FAST,
            "--checkpoint-a",
            "a.pt",
            "--checkpoint",
            "report.json",
            "--out",
            ".",
        ),
        2,
        "would overwrite --checkpoint",
        files({"a.pt": "a", "report.json": "b"}),
    ),
    # 16. a path that cannot be written is refused before any work
    Hostile(
        "out-out-dangling-link",
        (*SPECTRUM, "--out", "run"),
        2,
        "which does not exist",
        files({"run": "->gone"}),
    ),
    Hostile(
        "out-out-below-dangling-link",
        (*SPECTRUM, "--out", "run/x"),
        2,
        "which does not exist",
        files({"run": "->gone"}),
    ),
    Hostile(
        "out-out-symlink-loop", (*SPECTRUM, "--out", "loop"), 2, "symlink loop", files({"loop": "->loop"})
    ),
    Hostile("out-out-sys", (*SPECTRUM, "--out", "/sys/condcli-run"), 2, "cannot write in /sys"),
    Hostile(
        "out-out-proc", ("sweep-lambda", *FAST, "--out", "/proc/condcli-run"), 2, "cannot write in /proc"
    ),
    Hostile("out-junit-proc", (*CHECK, "--junit", "/proc/condcli.xml"), 2, "cannot write in /proc"),
    Hostile(
        "out-junit-dangling-link",
        (*CHECK, "--junit", "j.xml"),
        2,
        "which does not exist",
        files({"j.xml": "->gone/j.xml"}),
    ),
    Hostile(
        "out-junit-symlink-loop", (*CHECK, "--junit", "j.xml"), 2, "symlink loop", files({"j.xml": "->j.xml"})
    ),
    Hostile(
        "out-junit-below-file",
        (*CHECK, "--junit", "f/j.xml"),
        2,
        "is a file, not a folder",
        files({"f": "x"}),
    ),
    Hostile(
        "out-junit-newline-path",
        (*CHECK, "--junit", "a\nb/j.xml"),
        2,
        "is a file, not a folder",
        newline_file,
    ),
    # 7. a name over NAME_MAX, an empty value
    Hostile("out-out-name-max", (*SPECTRUM, "--out", LONG), 2, "more than the 255"),
    Hostile("out-out-name-max-inner", ("rank-decay", *FAST, "--out", f"a/{LONG}/b"), 2, "more than the 255"),
    Hostile("out-out-path-max", (*SPECTRUM, "--out", DEEP), 2, "longer than 4096 bytes"),
    Hostile("out-junit-path-max", (*CHECK, "--junit", f"{DEEP}/j.xml"), 2, "longer than 4096 bytes"),
    Hostile("out-junit-name-max", (*CHECK, "--junit", f"{LONG}.xml"), 2, "more than the 255"),
    Hostile("out-out-empty", (*SPECTRUM, "--out", ""), 2, "'--out': it is empty"),
    Hostile(
        "out-compare-out-empty", ("compare", "vit-plain", "vit-conditioned", "--out", ""), 2, "it is empty"
    ),
    Hostile("out-junit-empty", (*CHECK, "--junit", ""), 2, "'--junit': it is empty"),
    # check --out DIR: report.json and report.html, never over the baseline or the --junit file
    Hostile(
        "out-check-out-over-baseline",
        ("check", *FAST, "--baseline", "o/report.json", "--out", "o"),
        2,
        "writing report.json there would overwrite --baseline",
        files({"o/report.json": "{}"}),
    ),
    Hostile(
        "out-check-out-is-junit",
        (*CHECK, "--junit", "o/report.html", "--out", "o"),
        2,
        "--junit o/report.html is report.html of --out o",
    ),
    Hostile("out-check-out-fifo", (*CHECK, "--out", "f"), 2, "is a FIFO, not a folder", files({"f": "fifo"})),
    Hostile(
        "out-check-out-html-folder",
        (*CHECK, "--out", "o"),
        2,
        "report.html there is a folder",
        files({"o/report.html": "dir/"}),
    ),
    # a missing folder for --junit or --out is made (and the run succeeds)
    Hostile(
        "out-junit-missing-folder", (*CHECK, "--no-conditioned", "--junit", "ci/reports/j.xml"), 0, "wrote"
    ),
    Hostile(
        "out-out-missing-folder",
        (*SPECTRUM, "--layers", "0", "--no-conditioned", "--out", "a/b/run"),
        0,
        "wrote",
    ),
    # --out and --csv into one folder: one folder, the report kept (issue 38, item 2); the user's files stay
    Hostile(
        "out-out-and-csv-one-folder",
        (*SPECTRUM, "--layers", "0", "--no-conditioned", "--out", "o", "--csv", "./o"),
        0,
        "o/report.html",
        files({"o/notes.txt": "the user's"}),
    ),
    Hostile(
        "out-csv-beside-a-users-report",
        (*SPECTRUM, "--layers", "none", "--no-conditioned", "--csv", "o"),
        0,
        "o/samples.csv",
        files({"o/report.json": "{}", "o/report.html": "mine"}),
    ),
]
CASES += [
    Hostile(f"out-report-{name}", ("report", *argv), code, says, files(content), watch=(os.devnull,))
    for name, argv, code, says, content in REPORT_CASES
]
