"""The JSON Schema of every command's report (``condcli schema [COMMAND]``), shipped as package data
(``schemas/report.schema.json``) and completed from the metric registry when loaded.

The file declares every section by hand, closed (``additionalProperties``/``unevaluatedProperties``
false): a key a report adds without adding it here fails validation, on purpose. The objects it marks with
``x-registry`` get one property per metric of :mod:`condcli.reports.metrics` (the per-layer, per-head,
weight and embedding metrics and the below-precision flags), so a new ``MetricDef`` needs no edit here.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from condcli.commands import BY_NAME, REPORTING
from condcli.errors import UsageError
from condcli.reports.metrics import EMBEDDING, FLAGS, FORWARD, HEAD, WEIGHTS

SCHEMA_FILE = "schemas/report.schema.json"
SCHEMA_VERSION = 1  # every report's schema_version, and the one this schema describes (defined only here)
COMMANDS = tuple(c.name for c in REPORTING)  # from the command registry
DIALECT = "https://json-schema.org/draft/2020-12/schema"

AGG = {"$ref": "#/$defs/aggregate_or_null"}
NUM = {"$ref": "#/$defs/num_or_null"}


def _metrics(kind: str) -> dict[str, Any]:
    """The generated properties of an object marked ``x-registry: kind``."""
    if kind == "flags":
        return {flag: {"$ref": "#/$defs/int_or_null"} for flag in FLAGS}
    if kind == "forward":
        return {m.key: AGG for m in FORWARD}
    if kind == "head":
        return {m.key: AGG for m in HEAD}
    if kind == "layer":
        weights = {m.key: NUM for m in WEIGHTS} | {
            f"{m.key}_heads": {"$ref": "#/$defs/nums"} for m in WEIGHTS
        }
        return weights | _metrics("forward")
    if kind == "embedding":
        found: dict[str, Any] = {m.key: AGG for m in EMBEDDING}
        for m in EMBEDDING:
            if m.flag is not None and m.flag != "below_precision":
                found[m.flag] = {"$ref": "#/$defs/int_or_null"}
                found[f"{m.flag}_samples"] = {"$ref": "#/$defs/ints"}
        return found
    raise ValueError(f"unknown x-registry {kind!r}")


def _complete(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with each ``x-registry`` object's metric properties added (a layer also takes every
    property of a forward: its plain forward's numbers sit beside its own fields)."""
    if isinstance(node, list):
        return [_complete(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _complete(v, defs) for k, v in node.items()}
    kind = out.pop("x-registry", None)
    if kind is not None:
        own = out.setdefault("properties", {})
        extra = _metrics(kind)
        if kind == "layer":
            extra = {**defs["forward"]["properties"], **extra}
        out["properties"] = {**extra, **own} if kind != "layer" else {**own, **extra}
    return out


@cache
def _defs() -> dict[str, Any]:
    text = resources.files("condcli.reports").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    defs: dict[str, Any] = json.loads(text)["$defs"]
    defs["forward"] = _complete(defs["forward"], defs)
    return {name: _complete(node, defs) for name, node in defs.items()}


def schema_of(command: str | None = None) -> dict[str, Any]:
    """The schema of ``command``'s report; None: of any command's (chosen by its ``command`` key)."""
    defs = copy.deepcopy(_defs())
    head = {"$schema": DIALECT, "$id": f"https://condcli.dev/schema/v{SCHEMA_VERSION}/"}
    if command is None:
        return {
            **head,
            "title": f"condcli report, schema_version {SCHEMA_VERSION}",
            "type": "object",
            "required": ["schema_version", "command"],
            "properties": {"command": {"enum": list(COMMANDS)}},
            "allOf": [
                {
                    "if": {"properties": {"command": {"const": c}}},
                    "then": {"$ref": f"#/$defs/{BY_NAME[c].schema}"},
                }
                for c in COMMANDS
            ],
            "$defs": defs,
        }
    if command not in COMMANDS:
        raise UsageError(f"no report schema for {command!r}", f"the commands: {', '.join(COMMANDS)}")
    ref = f"#/$defs/{BY_NAME[command].schema}"
    return {**head, "title": f"condcli {command} report", "$ref": ref, "$defs": defs}


@cache
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(schema_of(None))


def problems(report: Any, most: int = 5) -> list[str]:
    """What in ``report`` the schema refuses (``path: message``, at most ``most``); [] where it is valid.
    Needs jsonschema (a dev dependency)."""
    found = []
    for error in _validator().iter_errors(report):
        deepest = error
        while deepest.context:  # the branch of an anyOf/if that says the most
            deepest = max(deepest.context, key=lambda e: len(e.absolute_path))
        where = "".join(f"[{p!r}]" for p in deepest.absolute_path) or "(top)"
        found.append(f"{where}: {deepest.message[:300]}")
        if len(found) >= most:
            break
    return found
