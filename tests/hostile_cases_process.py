"""Hostile-input cases: the process and the CI gate's files (run by tests/test_hostile.py through
tests/hostile_harness.py).

``proc-``: how a run ends — an unknown command or option, --debug anywhere, the real console process
(``python -m condcli``) for the same lines, and a run out of memory under an address-space limit (one line,
exit 2). Signals and a closed stdout need a child driven from outside: tests/test_process_signals.py.

``gate-``: ``check``'s baseline and config files — a value no metric can take (κ = −5), integers too large
for a float, deep nesting, NaN, a FIFO, a folder, a name the file system refuses, a repeated or negative
layer index, absurd limits and tolerances: each one line, exit 2, before any analysis.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.gate_reports import agg, layer, report
from tests.hostile_harness import Hostile

FAST = ("--max-samples", "2", "--batch-size", "2")
CHECK = ("check", *FAST)
BASE = (*CHECK, "--baseline", "b.json")


def baseline(data: dict[str, Any] | str) -> Callable[[Path], None]:
    """A setup writing ``b.json`` (a report dict as JSON, or the text itself)."""

    def make(tmp: Path) -> None:
        (tmp / "b.json").write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")

    return make


def text(name: str, content: str | bytes) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())

    return make


def fifo(name: str) -> Callable[[Path], None]:
    return lambda tmp: os.mkfifo(tmp / name)


def folder(name: str) -> Callable[[Path], None]:
    return lambda tmp: (tmp / name).mkdir()


def with_layers(*layers: dict[str, Any]) -> dict[str, Any]:
    return report([10.0], layers=list(layers))


def entropy(value: float) -> dict[str, Any]:
    one = layer(0, [5.0], [50.0])
    one["attention_entropy"] = agg([value])
    return with_layers(one)


GOOD = json.dumps(report([10.0]))
DEEP = "[" * 200_000 + "]" * 200_000
HUGE = "1" + "0" * 400  # 10^400: an int, too large for a float
CHECK_TABLE = "[tool.condcli.check]\n"

CASES: list[Hostile] = [
    # how a run ends
    Hostile("proc-unknown-command", ("frobnicate",), 2, "No such command 'frobnicate'"),
    Hostile("proc-unknown-option", ("spectrum", "--frobnicate"), 2, "No such option: --frobnicate"),
    Hostile("proc-debug-and-bad-option", ("--debug", "spectrum", "--frobnicate"), 2, "No such option"),
    Hostile("proc-child-unknown-command", ("frobnicate",), 2, "No such command", process=True),
    Hostile("proc-child-bad-baseline", BASE, 2, "is never below 1", baseline(report([-5.0])), process=True),
    Hostile("proc-child-empty-stdin", ("spectrum", "--frobnicate"), 2, "No such option", stdin=b""),
    Hostile(
        "proc-out-of-memory",  # a batch of 20000 images at once, under 4 GiB: one line, not a traceback
        ("spectrum", "--max-samples", "20000", "--batch-size", "20000", "--layers", "none"),
        2,
        "memory",
        memory_gib=4,
    ),
    # a limit no value of the metric can pass says what the metric is (issue 38, item 8): a sink score is an
    # attention mass in [0, 1], not a condition number
    Hostile(
        "gate-max-sink-negative", (*CHECK, "--max-sink", "-0.1"), 2, "sink is never below 0 (it lies between"
    ),
    Hostile(
        "gate-max-kappa-below-1", (*CHECK, "--max-kappa", "0.5"), 2, "a condition number is never below 1"
    ),
    # 14. a baseline value no metric can take: malformed (exit 2), not a regression (exit 1)
    Hostile("gate-baseline-kappa-minus-5", BASE, 2, "embedding.kappa.median is -5", baseline(report([-5.0]))),
    Hostile("gate-baseline-kappa-below-1", BASE, 2, "is never below 1", baseline(report([0.25]))),
    Hostile("gate-baseline-entropy-above-1", BASE, 2, "H(P) is never above 1", baseline(entropy(1.5))),
    Hostile("gate-baseline-entropy-negative", BASE, 2, "H(P) is never below 0", baseline(entropy(-0.5))),
    Hostile(
        "gate-baseline-weight-kappa-zero",
        BASE,
        2,
        "layers[0].kappa_wq is 0",
        baseline(with_layers({**layer(0, [5.0], [50.0]), "kappa_wq": 0})),
    ),
    Hostile(
        "gate-baseline-nan", BASE, 2, "is NaN", baseline(GOOD.replace('"median": 10.0', '"median": NaN', 1))
    ),
    Hostile(
        "gate-baseline-minus-inf",
        BASE,
        2,
        "is never below 1",
        baseline(GOOD.replace('"median": 10.0', '"median": "-inf"', 1)),
    ),
    Hostile(
        "gate-baseline-huge-integer",
        BASE,
        2,
        "too large to be a number",
        baseline(GOOD.replace('"median": 10.0', f'"median": {HUGE}', 1)),
    ),
    Hostile(
        "gate-baseline-5000-digits",
        BASE,
        2,
        "integer with thousands of digits",
        baseline('{"a": ' + "7" * 5000 + "}"),
    ),
    Hostile("gate-baseline-deep-nesting", BASE, 2, "nested too deeply", baseline(DEEP)),
    Hostile("gate-baseline-not-utf8", BASE, 2, "not UTF-8", text("b.json", b'{"schema_version": "\xff"}')),
    Hostile(
        "gate-baseline-repeated-layer",
        BASE,
        2,
        "which an earlier layer has too",
        baseline(with_layers(layer(1, [5.0], [50.0]), layer(1, [5.0], [50.0]))),
    ),
    Hostile(
        "gate-baseline-negative-layer",
        BASE,
        2,
        "not a layer index",
        baseline(with_layers({**layer(0, [5.0], [50.0]), "index": -1})),
    ),
    Hostile("gate-baseline-fifo", BASE, 2, "is not a file", fifo("b.json")),  # never opened: no hang
    Hostile("gate-baseline-folder", BASE, 2, "is not a file", folder("b.json")),
    Hostile("gate-baseline-name-too-long", (*CHECK, "--baseline", "b" * 300), 2, "not a usable path"),
    Hostile("gate-baseline-empty-file", BASE, 2, "invalid JSON", baseline("")),
    # [tool.condcli.check] and --config
    Hostile(
        "gate-config-deep-nesting",
        (*CHECK, "--config", "c.toml"),
        2,
        "nested too deeply",
        text("c.toml", CHECK_TABLE + "max_kappa = " + DEEP),
    ),
    Hostile(
        "gate-config-huge-integer",
        (*CHECK, "--config", "c.toml"),
        2,
        "integer too large",
        text("c.toml", CHECK_TABLE + f"max_kappa = {HUGE}"),
    ),
    Hostile(
        "gate-pyproject-not-utf8",
        (*CHECK, "--max-kappa", "100"),
        2,
        "not UTF-8",
        text("pyproject.toml", CHECK_TABLE.encode() + b"statistic = '\xe9'\n"),
    ),
    Hostile(
        "gate-config-fifo",
        (*CHECK, "--max-kappa", "100", "--config", "c.toml"),
        2,
        "is not a file",
        fifo("c.toml"),
    ),
    Hostile(
        "gate-config-name-too-long",
        (*CHECK, "--max-kappa", "100", "--config", "c" * 300),
        2,
        "not a usable path",
    ),
    Hostile(
        "gate-config-baseline-nul",
        CHECK,
        2,
        "no such file",
        text("pyproject.toml", CHECK_TABLE + 'baseline = "b\\u0000.json"\n'),
    ),
    # absurd limits and tolerances
    Hostile("gate-limit-overflows-to-inf", (*CHECK, "--max-kappa", "1e400"), 2, "must be a finite number"),
    Hostile("gate-limit-nan", (*CHECK, "--max-mu-la", "nan"), 2, "must be a finite number"),
    Hostile("gate-entropy-limit-above-1", (*CHECK, "--min-attention-entropy", "2"), 2, "must be ≤ 1"),
    Hostile(
        "gate-tolerance-inf",
        (*BASE, "--tolerance", "1e400%"),
        2,
        "must be a finite number ≥ 0",
        baseline(GOOD),
    ),
    Hostile("gate-tolerance-bare-10", (*BASE, "--tolerance", "10"), 2, "is ambiguous", baseline(GOOD)),
    # a control character in what the user typed stays escaped: the error is one line, no cursor moves
    Hostile("proc-text-path-newline", ("spectrum", "bert-docstrings", "--text", "a\nb.txt"), 2, "a\\nb.txt"),
    Hostile("proc-model-ansi-escape", ("spectrum", "./no\x1b[2Jmodel"), 2, "\\x1b[2J"),
]
