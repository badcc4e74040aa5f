"""Hostile-input cases: numbers and option values (run by tests/test_hostile.py via tests/hostile_harness.py).

What condcli does with them: any finite λ ≥ 0 is analysed (κ(X + λ·I_k) → 1 for a huge one; condcli.spectra
scales first), and a conditioned forward that a huge λ overflows in the model's dtype is one exit-2 line
saying so; --conditioned is checked as itself; a sweep grid holds at most 1000 points, checked before it is
built; --seed is 0 … 2^32 − 1; an empty MODEL is refused; pyproject.toml, --adapter TOML and --model-arg JSON
literals that are nested too deeply or hold huge integers are one line naming the file or option.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.hostile_harness import Hostile

FAST = ("--max-samples", "2", "--layers", "none")
ONE = ("--max-samples", "1")
DEEP = "[" * 10_000 + "]" * 10_000  # past any parser's recursion limit
HUGE_INT = "1" * 5000  # past Python's 4300-digit int conversion limit


def _write(name: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        data = text.encode() if isinstance(text, str) else text
        (tmp / name).write_bytes(data)

    return setup


ADAPTER = "--adapter"
TOY = "tests.toy_models:toy_factory"

CASES: list[Hostile] = [
    Hostile("num-layers-garbage", ("spectrum", "--layers", "x,y"), 2, "--layers"),
    Hostile("num-layers-garbage-child", ("spectrum", "--layers", "x,y"), 2, "--layers", memory_gib=6),
    # λ: any finite λ ≥ 0 is analysed; where it is fed to the model, an overflow there is named
    Hostile("num-lambda-1e200", ("spectrum", "--lambda", "1e200", *FAST), 0, ""),
    Hostile(
        "num-lambda-1e155-sweep-layers-none", ("sweep-lambda", "--lambdas", "1,1.5e154,1e155", *FAST), 0, ""
    ),
    Hostile("num-lambda-max-float", ("spectrum", "--lambda", "1.7e308", *FAST), 0, ""),
    Hostile(
        "num-lambda-conditioned-forward", ("spectrum", "--lambda", "1e200", *ONE), 2, "overflows the model"
    ),
    Hostile("num-lambda-past-float32", ("spectrum", "--lambda", "3.5e38", *ONE), 2, "NaN/Inf in float32"),
    Hostile(
        "num-lambda-nan", ("spectrum", "--lambda", "nan", *FAST), 2, "--lambda must be a finite number ≥ 0"
    ),
    Hostile(
        "num-lambda-inf", ("spectrum", "--lambda", "inf", *FAST), 2, "--lambda must be a finite number ≥ 0"
    ),
    Hostile("num-lambda-negative", ("spectrum", "--lambda", "-1", *FAST), 2, "--lambda must be a finite"),
    Hostile("num-lambda-minus-zero", ("spectrum", "--lambda", "-0.0", *FAST), 0, ""),
    Hostile(
        "num-conditioned-nan",
        ("rank-decay", "--conditioned", "nan", *ONE),
        2,
        "--conditioned must be a finite",
    ),
    Hostile("num-conditioned-negative", ("rank-decay", "--conditioned", "-5", *ONE), 2, "--conditioned must"),
    Hostile("num-conditioned-huge", ("rank-decay", "--conditioned", "1e200", *ONE), 2, "overflows the model"),
    # the sweep grid: a documented maximum, checked before the grid is built or the model loaded
    Hostile(
        "num-steps-1e8",
        ("sweep-lambda", "--steps", "100000000"),
        2,
        "--steps asks for 100000000",
        memory_gib=6,
    ),
    Hostile("num-steps-1e27", ("sweep-lambda", "--steps", "1" + "0" * 27), 2, "at most 1000"),
    Hostile("num-steps-one", ("sweep-lambda", "--steps", "1"), 2, "--steps must be at least 2"),
    Hostile(
        "num-lambdas-1001",
        ("sweep-lambda", "--lambdas", ",".join(map(str, range(1001)))),
        2,
        "--lambdas asks",
    ),
    Hostile("num-lambdas-nan", ("sweep-lambda", "--lambdas", "1,1,nan"), 2, "must be finite"),
    Hostile("num-lambdas-duplicates", ("sweep-lambda", "--lambdas", "2,1,2,1e300", *FAST), 0, ""),
    Hostile("num-lambdas-garbage", ("sweep-lambda", "--lambdas", "1,,2"), 2, "--lambdas"),
    Hostile("num-range-huge", ("sweep-lambda", "--range", "0", "1e300", "--steps", "3", *FAST), 0, ""),
    Hostile("num-range-reversed", ("sweep-lambda", "--range", "5", "1"), 2, "LO must be smaller than HI"),
    Hostile("num-range-empty", ("sweep-lambda", "--range", "0", "0"), 2, "LO must be smaller than HI"),
    Hostile("num-range-negative", ("sweep-lambda", "--range", "-1", "5"), 2, "λ must be ≥ 0"),
    Hostile(
        "num-range-narrow",
        ("sweep-lambda", "--range", "1", "1.0000000000000002", "--steps", "5"),
        2,
        "too narrow",
    ),
    Hostile("num-target-nan", ("sweep-lambda", "--target-kappa", "nan"), 2, "--target-kappa"),
    Hostile("num-target-one", ("sweep-lambda", "--target-kappa", "1"), 2, "--target-kappa"),
    # --seed: the range torch and NumPy both take
    Hostile(
        "num-seed-negative", ("spectrum", "--seed", "-1", *FAST), 2, "--seed must be between 0 and 4294967295"
    ),
    Hostile("num-seed-2-64", ("spectrum", "--seed", str(2**64), *FAST), 2, "--seed must be between"),
    Hostile("num-seed-2-32", ("spectrum", "--seed", str(2**32), *FAST), 2, "--seed must be between"),
    Hostile("num-seed-max", ("spectrum", "--seed", str(2**32 - 1), *FAST), 0, ""),
    Hostile("num-seed-garbage", ("spectrum", "--seed", "1e3"), 2, "--seed"),
    # other option values reach the check that names them
    Hostile("num-tolerance-nan", ("check", "--tolerance", "nan", "--max-kappa", "5"), 2, "--tolerance"),
    Hostile("num-max-kappa-nan", ("check", "--max-kappa", "nan"), 2, "--max-kappa"),
    Hostile("num-max-samples-negative", ("spectrum", "--max-samples", "-1"), 2, "--max-samples"),
    Hostile("num-batch-size-negative", ("spectrum", "--batch-size", "-1"), 2, "--batch-size"),
    Hostile("num-index-huge", ("rank-decay", "--index", "1" + "0" * 23, *ONE), 2, "--index"),
    # a device that is not there: one line (no CUDA here, or not that many GPUs), exit 2, before any loading
    Hostile("num-device-cuda-missing", ("spectrum", "--device", "cuda:4096", *FAST), 2, "--device cuda:4096"),
    Hostile("num-device-unknown", ("sweep-lambda", "--device", "tpu", *FAST), 2, "--device"),
    # an empty MODEL (an unset variable) is refused, never read as "no MODEL"
    Hostile("num-model-empty", ("check", "", "--max-kappa", "1e9"), 2, "MODEL is empty"),
    Hostile("num-model-blank", ("spectrum", "  ", *FAST), 2, "MODEL is empty"),
    Hostile("num-compare-empty", ("compare", "vit-plain", "", *FAST), 2, "MODEL is empty"),
    Hostile(
        "num-config-model-empty",
        ("spectrum", *FAST),
        2,
        "[tool.condcli] model must be a non-empty string",
        setup=_write("pyproject.toml", '[tool.condcli]\nmodel = ""\n'),
    ),
    # hostile TOML and JSON where condcli reads a project's settings
    Hostile(
        "num-config-deep",
        ("spectrum", *FAST),
        2,
        "pyproject.toml: it is nested too deeply",
        setup=_write("pyproject.toml", f"[tool.condcli]\nmodel_args = {{ depth = {DEEP} }}\n"),
    ),
    Hostile(
        "num-config-huge-int",
        ("spectrum", *FAST),
        2,
        "integer with thousands of digits",
        setup=_write("pyproject.toml", f"[tool.condcli]\nmodel = {HUGE_INT}\n"),
    ),
    Hostile(
        "num-config-not-utf8",
        ("spectrum", *FAST),
        2,
        "not UTF-8",
        setup=_write("pyproject.toml", b"[tool.condcli]\nmodel = '\xff'\n"),
    ),
    Hostile(
        "num-config-tool-not-table",
        ("spectrum", *FAST),
        2,
        "is not a table",
        setup=_write("pyproject.toml", "tool = 5\n"),
    ),
    Hostile(
        "num-adapter-deep",
        ("spectrum", TOY, ADAPTER, "a.toml", *FAST),
        2,
        "--adapter a.toml: it is nested too deeply",
        setup=_write("a.toml", f"input = {DEEP}\n"),
    ),
    Hostile(
        "num-adapter-huge-int",
        ("spectrum", TOY, ADAPTER, "a.toml", *FAST),
        2,
        "--adapter a.toml: it holds an integer",
        setup=_write("a.toml", f"[attention]\nheads = {HUGE_INT}\n"),
    ),
    Hostile(
        "num-model-arg-deep", ("spectrum", TOY, "--model-arg", f"depth={DEEP}", *FAST), 2, "nested too deeply"
    ),
    Hostile(
        "num-model-arg-huge-int",
        ("spectrum", TOY, "--model-arg", f"depth={HUGE_INT}", *FAST),
        2,
        "--model-arg",
    ),
]
