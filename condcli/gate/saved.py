"""Saved reports as the sides of ``compare`` (docs/commands/compare.md#saved-reports): read from a file
(anything that is not a condcli spectrum or check report is one line, exit 2), checked against each other,
and the settings a model compared with a saved report runs with.

A side is a saved report when its text ends in ``.json``. The file must be a regular file (never a FIFO or
a device) holding a condcli report that matches the shipped JSON Schema (when jsonschema is installed; the
shape checks of :func:`condcli.gate.metrics.extract_metrics` run in any case). Two saved reports must be of
one command and one schema version.

A model compared with a saved report runs with the report's settings where they change the numbers, each
unless given: its seed (synthetic inputs, random weights), its number of samples, its dtype, its layers
(the indices it analysed; those the model lacks are left out), its conditioned forward, and its λ (for a
model that does not condition itself: one that does keeps its own, as ``compare`` always does). The report
does not record where its images or text came from: the model reads what ``images``/``text`` say, and a
warning says when the inputs differ.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from condcli.analysis.runs import RunOptions
from condcli.errors import InputError

HINT = "make one with: condcli spectrum --json > report.json"
ADOPTABLE = ("seed", "max_samples", "dtype", "layers", "lam", "conditioned")  # what a report can set


def is_report_path(text: str) -> bool:
    """Whether a MODEL side names a saved report (a ``.json`` file)."""
    return text.strip().lower().endswith(".json")


def read_report(path: Path, where: str) -> dict[str, Any]:
    """The condcli report in ``path``; every problem is one :class:`InputError` naming ``where``."""
    from condcli.outpaths import kind
    from condcli.parsing import read_json

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{where}: no such file", HINT) from None
    except (OSError, ValueError) as e:  # a loop, a name too long, a NUL byte
        raise InputError(f"{where} cannot be read ({getattr(e, 'strerror', None) or e})", HINT) from None
    if not stat.S_ISREG(mode):  # never read a FIFO (it blocks) or a device (it never ends)
        raise InputError(f"{where} is {kind(mode)}, not a file", HINT)
    data = read_json(path, where, HINT)
    if not isinstance(data, dict):
        raise InputError(f"{where} is not a condcli report (not a JSON object)", HINT)
    tool = data.get("tool")
    if not isinstance(tool, dict) or tool.get("name") != "condcli" or "schema_version" not in data:
        raise InputError(f'{where} is not a condcli report (no tool.name "condcli" and schema_version)', HINT)
    return data


def check_pair(a: Mapping[str, Any], b: Mapping[str, Any], where_a: str, where_b: str) -> None:
    """Two saved reports compare only when they are of one schema version and one command."""
    va, vb = a.get("schema_version"), b.get("schema_version")
    if va != vb:
        raise InputError(
            f"{where_a} has schema_version {va!r} and {where_b} {vb!r}: compare reads two reports of one "
            "schema version",
            "make both again with this condcli: condcli spectrum --json > report.json",
        )
    ca, cb = a.get("command"), b.get("command")
    if ca != cb:
        raise InputError(
            f"{where_a} is a {ca!r} report and {where_b} a {cb!r} report: compare reads two reports of one "
            "command",
            "make both with condcli spectrum --json (or both with condcli check --json)",
        )


def check_schema(report: Mapping[str, Any], where: str) -> None:
    """``report`` against the shipped JSON Schema (:func:`condcli.reports.schema.problems`); skipped where
    jsonschema is not installed."""
    from condcli.reports.schema import problems

    try:
        found = problems(report, most=1)
    except ImportError:
        return
    if found:
        text = " ".join(found[0].split())
        raise InputError(f"{where} does not match condcli's report schema: {text[:300]}", HINT)


@dataclass(frozen=True)
class Adopted:
    """The settings of a saved report that the model compared with it runs with (see the module)."""

    source: str  # which report, e.g. "MODEL_A a.json"
    taken: tuple[str, ...]  # the fields taken from it (of :data:`ADOPTABLE`)
    layers: list[int] | None  # the report's layer indices; None: every layer (or not taken: see ``taken``)
    lam: float | None  # the report's λ, for a model that does not condition itself
    conditioned: bool

    def layers_of(self, count: int, chosen: list[int] | None) -> list[int] | None:
        """The layers a model of ``count`` layers analyses: the report's that it has (None: every layer),
        else ``chosen`` (the options')."""
        if "layers" not in self.taken:
            return chosen
        return None if self.layers is None else [i for i in self.layers if i < count]


def adopt(
    run: RunOptions, report: Mapping[str, Any], given: Collection[str], source: str
) -> tuple[RunOptions, Adopted]:
    """``run`` with the report's seed, number of samples and dtype where not ``given``; the report's layers,
    λ and conditioned forward for the run to apply (see :class:`Adopted`)."""
    settings, inputs = _part(report, "settings"), _part(report, "inputs")
    taken: list[str] = []
    changes: dict[str, Any] = {}
    seed, count, dtype = settings.get("seed"), inputs.get("count"), settings.get("dtype")
    if "seed" not in given and _int(seed) and seed >= 0:
        changes["seed"] = seed
    if "max_samples" not in given and _int(count) and count >= 1:
        changes["max_samples"] = count
    if "dtype" not in given and isinstance(dtype, str) and _known_dtype(dtype):
        changes["dtype"] = dtype
    taken += list(changes)
    readable, layers = _layers(report)
    take_layers = "layers" not in given and readable
    if take_layers:
        taken.append("layers")
    lam = settings.get("lambda")
    lam_taken = None
    if "lam" not in given and isinstance(lam, (int, float)) and not isinstance(lam, bool):
        lam_taken = float(lam) if math.isfinite(lam) and lam >= 0 else None
    if lam_taken is not None:
        taken.append("lam")
    conditioned = settings.get("conditioned_forward") is True and "conditioned" not in given
    if conditioned:
        taken.append("conditioned")
    adopted = Adopted(source, tuple(taken), layers if take_layers else None, lam_taken, conditioned)
    return replace(run, **changes), adopted


def describe(adopted: Adopted, run: RunOptions, side: str, own_lambda: bool) -> str:
    """One note: what the model on ``side`` takes from the report (``own_lambda``: the model conditions
    itself, and keeps its own λ)."""
    words = {
        "seed": f"seed {run.seed}",
        "max_samples": f"{run.max_samples} samples",
        "dtype": f"dtype {run.dtype}",
        "layers": "every layer"
        if adopted.layers is None
        else "no layer"
        if not adopted.layers
        else f"layers {','.join(map(str, adopted.layers))}",
        "lam": "" if adopted.lam is None or own_lambda else f"λ {adopted.lam:g}",
        "conditioned": "the conditioned forward",
    }
    shown = ", ".join(words[k] for k in adopted.taken if words[k])
    return f"{side} runs with the settings of {adopted.source}: {shown} (options given win)"


def _part(report: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    part = report.get(key)
    return part if isinstance(part, Mapping) else {}


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _known_dtype(name: str) -> bool:
    from condcli.loading.devices import DTYPES

    return name in DTYPES


def _layers(report: Mapping[str, Any]) -> tuple[bool, list[int] | None]:
    """(readable, the layer indices the report asked for: analysed or refused; None: all of its model's)."""
    found: list[int] = []
    for key in ("layers", "layers_refused"):
        entries = report.get(key, [])
        if not isinstance(entries, list):
            return False, None
        for entry in entries:
            index = entry.get("index") if isinstance(entry, Mapping) else None
            if not _int(index) or index < 0:
                return False, None
            found.append(index)
    count = _part(report, "model").get("num_layers")
    if _int(count) and count > 0 and sorted(set(found)) == list(range(count)):
        return True, None
    return True, sorted(set(found))
