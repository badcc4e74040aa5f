"""The shipped samples' spectrum reports as they were when last written (tests/golden/*.json), and how a
fresh one is compared with them: a refactor must leave every report the same.

Keys, strings, integers and booleans must be equal; a float must agree within what the capture supports: the
relative uncertainty its aggregate states (``rel_uncertainty``, docs/math.md#digits-a-capture-supports), and
never looser than :data:`RTOL` (every value condcli reports as a measurement agrees with float64 SVD to
1e-6). A stated relative uncertainty is itself a relative quantity computed in float64: it agrees within
:data:`RTOL` or within :data:`REL_RESOLUTION` absolute (an uncertainty of 3.7e-13 moves by 1e-16 where
another CPU's BLAS rounds its inputs one ulp apart). ``tool`` (versions) is not compared.

Rewrite the files after an intended change: ``.venv/bin/python -m tests.golden_reports``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent / "golden"
SAMPLES = ("vit-plain", "vit-conditioned", "bert-docstrings", "gpt2-docstrings", "llama-docstrings")
ARGS = ("--max-samples", "2", "--json")
INPUTS = {"llama-docstrings": ("--text", "llama-docstrings/prompts.txt")}  # the LLM on its own prompts
RTOL = 1e-6
REL_RESOLUTION = 16 * 2.0**-52  # a stated relative uncertainty, absolute: float64's resolution, a few ulps
SKIPPED = {"tool"}  # the versions that wrote it


def golden_path(sample: str) -> Path:
    return FOLDER / f"spectrum-{sample}.json"


def _rel(node: dict[str, Any]) -> float:
    """The largest finite relative uncertainty an aggregate states (0 where it states none)."""
    rel = node.get("rel_uncertainty")
    if not isinstance(rel, dict):
        return 0.0
    values = [v for v in (rel.get(s) for s in ("median", "mean", "min", "max")) if isinstance(v, float)]
    values += [v for v in rel.get("per_sample") or () if isinstance(v, float)]
    return max((v for v in values if math.isfinite(v)), default=0.0)


def differences(want: Any, got: Any, path: str = "", rtol: float = RTOL) -> list[str]:
    """Where ``got`` differs from ``want`` beyond what the capture supports (see the module)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(want) != set(got):
            return [f"{path}: keys {sorted(set(want) ^ set(got if isinstance(got, dict) else {}))}"]
        tol = max(rtol, 2 * _rel(want))
        out = []
        for key in want:
            if path == "" and key in SKIPPED:
                continue
            out += differences(want[key], got[key], f"{path}.{key}", tol)
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(want) != len(got):
            return [f"{path}: a list of {len(want)} became {got!r:.80}"]
        return [
            d
            for i, (a, b) in enumerate(zip(want, got, strict=True))
            for d in differences(a, b, f"{path}[{i}]", rtol)
        ]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        floor = REL_RESOLUTION if ".rel_uncertainty" in path else 0.0
        if math.isclose(want, got, rel_tol=rtol, abs_tol=floor) or (want == got):
            return []
        return [f"{path}: {want!r} became {got!r} (beyond {rtol:.2g})"]
    return [] if want == got and type(want) is type(got) else [f"{path}: {want!r:.80} became {got!r:.80}"]


ROOT = Path(__file__).resolve().parents[1]
HERE = "<repository>"  # the checkout's own path, as the files hold it (a clone may lie anywhere)


def fresh(sample: str) -> dict[str, Any]:
    """``condcli spectrum SAMPLE --max-samples 2 --json`` (on :data:`INPUTS` where given), run in-process,
    with this checkout's path written as :data:`HERE`."""
    from typer.testing import CliRunner

    from condcli.cli import app

    result = CliRunner().invoke(app, ["spectrum", sample, *INPUTS.get(sample, ()), *ARGS])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout.replace(json.dumps(str(ROOT))[1:-1], HERE))
    return report


def main(argv: list[str] | None = None) -> None:
    """Rewrite the golden report of every sample, or of the samples named."""
    import sys

    names = (sys.argv[1:] if argv is None else argv) or list(SAMPLES)
    unknown = sorted(set(names) - set(SAMPLES))
    if unknown:
        raise SystemExit(
            f"not a sample with a golden report: {', '.join(unknown)} (they are: {', '.join(SAMPLES)})"
        )
    FOLDER.mkdir(exist_ok=True)
    for sample in names:
        golden_path(sample).write_text(json.dumps(fresh(sample), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {golden_path(sample)}")


if __name__ == "__main__":
    main()
