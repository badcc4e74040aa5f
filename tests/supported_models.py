"""The supported-models table of docs/commands/models.md, generated from the conformance cases
(tests/conformance_cases.py).

Every case is a tiny random-init model on which tests/test_conformance.py proves X, X_l, A_l, P, P·V and the
W slices. Per case the table says which architecture it is (read from the built model: its timm name or its
transformers class), which adapter family condcli gives it and where condcli takes P from (read from the
adapter's declared probes). Models defined in tests/ only (toys of the generic path) are left out.
tests/test_supported_models.py checks that the page holds exactly this table; after adding a case, run

    .venv/bin/python -m tests.supported_models
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from torch import nn

from condcli.adapters import adapter_for
from condcli.adapters.base import Adapter, LayerSpec
from tests.families import Case

BEGIN = "<!-- supported-models:begin -->"
END = "<!-- supported-models:end -->"
COMMAND = ".venv/bin/python -m tests.supported_models"
PAGE = Path(__file__).resolve().parent.parent / "docs" / "commands" / "models.md"
README = PAGE  # the page that holds the table (it was README.md before the README was cut to a start)
PASS_THROUGH = (nn.Softmax, nn.Dropout, nn.Identity)  # modules P passes through unchanged


@dataclass(frozen=True)
class Row:
    """One conformance case as the table shows it."""

    model: str  # e.g. "timm `vit_tiny_patch16_224`", "transformers `LlamaModel`"
    family: str  # the adapter module (condcli.adapters.FAMILIES)
    heads: str  # query heads, and KV heads under grouped-query attention: "4", "4 (KV 2)"
    probs: str  # where condcli takes P from
    case: str  # "family/variant" in tests/conformance_cases.py


def architecture(model: nn.Module) -> str | None:
    """The timm name or transformers class of ``model``; None for a model defined in tests/ only."""
    cfg = getattr(model, "pretrained_cfg", None)
    if isinstance(cfg, Mapping) and isinstance(cfg.get("architecture"), str):
        return f"timm `{cfg['architecture']}`"
    cls = type(model)
    for library in ("transformers", "timm"):  # a timm class built directly has no registered name
        if cls.__module__.startswith(f"{library}."):
            return f"{library} `{cls.__name__}`"
    if cls.__module__.startswith("tests."):
        return None
    return f"`{cls.__module__}.{cls.__name__}`"


def probs_source(spec: LayerSpec, names: Mapping[int, str]) -> str:
    """Where condcli reads one layer's P, from its declared probe.

    not observable (no probe) · softmax tap (a softmax computed as a function inside the attention's call) ·
    module (P is the output or input of a module it passes through: ``nn.Softmax``, ``attn_drop``) ·
    returned weights (what the attention module returns under eager attention) · recomputed (from
    another tensor of the call: the attention's input, a ``qkv`` output).
    """
    probe = spec.probs
    if probe is None:
        return "not observable"
    attn = spec.attn_in.module if spec.attn_in is not None else None
    side = "output" if probe.after else "input"
    name = "the attention" if probe.module is attn else f"`{names[id(probe.module)].rsplit('.', 1)[-1]}`"
    if getattr(probe, "tap", None) is not None:
        return "softmax tap"
    if isinstance(probe.module, PASS_THROUGH):
        return f"module: {side} of {name}"
    if probe.module is attn and probe.after:
        return "returned weights (eager)"
    return f"recomputed from the {side} of {name}"


def heads(spec: LayerSpec) -> str:
    w = spec.weights()
    return str(w.heads) if w.kv_heads == w.heads else f"{w.heads} (KV {w.kv_heads})"


def _distinct(values: Sequence[str]) -> str:
    return "; ".join(dict.fromkeys(values))


def describe(model: nn.Module, adapter: Adapter) -> tuple[str, str]:
    """(heads, where P comes from) over the adapter's layers, each distinct value once, in layer order."""
    names = {id(m): path for path, m in model.named_modules()}
    layers = adapter.layers
    return _distinct([heads(s) for s in layers]), _distinct([probs_source(s, names) for s in layers])


@cache
def row(family: str, variant: str, case: Case) -> Row | None:
    """The row of one case (its tiny model built once per process); None for a tests-only model."""
    model = case.build()
    arch = architecture(model)
    if arch is None:
        return None
    head_text, probs = describe(model, adapter_for(model))
    return Row(arch, family, head_text, probs, f"{family}/{variant}")


def rows(cases: Mapping[str, Mapping[str, Case]] | None = None) -> list[Row]:
    """Every case's row, families and variants in the conformance list's order."""
    if cases is None:
        from tests.conformance_cases import CASES

        cases = CASES
    found = [row(f, v, case) for f, variants in cases.items() for v, case in variants.items()]
    return [r for r in found if r is not None]


def table(found: Sequence[Row]) -> str:
    """The Markdown table, between its markers."""
    lines = [
        BEGIN,
        f"<!-- generated by `{COMMAND}` from tests/conformance_cases.py: do not edit by hand -->",
        "",
        "| model | adapter | heads | where P comes from | conformance case |",
        "|---|---|---|---|---|",
        *(f"| {r.model} | `{r.family}` | {r.heads} | {r.probs} | `{r.case}` |" for r in found),
        "",
        END,
    ]
    return "\n".join(lines)


def section(text: str) -> str | None:
    """The page's table between the markers (markers included); None where they are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start : end + len(END)]


def regenerate(path: Path = PAGE) -> bool:
    """Write the table into ``path`` between the markers; True if the file changed."""
    text = path.read_text(encoding="utf-8")
    old = section(text)
    if old is None:
        raise SystemExit(f"{path}: no {BEGIN} … {END} section to fill")
    new = table(rows())
    if new == old:
        return False
    path.write_text(text.replace(old, new), encoding="utf-8")
    return True


def main(argv: Sequence[str] | None = None) -> None:
    """Rewrite docs/commands/models.md's supported-models table from the conformance cases."""
    if list(argv if argv is not None else sys.argv[1:]):
        raise SystemExit(f"usage: {COMMAND}")
    name = PAGE.relative_to(PAGE.parents[2])
    print(f"{name} updated" if regenerate() else f"{name} already up to date")


if __name__ == "__main__":
    main()
