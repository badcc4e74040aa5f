"""The one table from library parameter names to the CLI's flags.

Library errors name the Python parameter a caller passed (``lam``, ``max_samples``; see
:mod:`condcli.errors`); :mod:`condcli.cli.main` shows them with :data:`PARAM_FLAGS`, so that a CLI user
reads ``--lambda`` and ``--max-samples`` instead.
"""

from __future__ import annotations

from types import MappingProxyType

from condcli.cli.options import COMMON_FLAGS
from condcli.errors import render
from condcli.reports.metrics import GATES

_FLAGS: dict[str, str] = {
    # loading a model and reading inputs: the option bundle's own declarations (lam → --lambda, …)
    **COMMON_FLAGS,
    # the analyses' own options
    "index": "--index",
    "heads": "--heads",
    "columns": "--columns",
    "csv": "--csv",
    "out": "--out",
    "fmt": "--format",
    "weights_only": "--weights-only",
    "wide": "--wide",
    "conditioned": "--conditioned",
    "value_range": "--range",
    "steps": "--steps",
    "lambdas": "--lambdas",
    "target_kappa": "--target-kappa",
    # check and compare
    "model_a": "MODEL_A",
    "model_b": "MODEL_B",
    "checkpoint_a": "--checkpoint-a",
    "config": "--config",
    "baseline": "--baseline",
    "junit": "--junit",
    "tolerance": "--tolerance",
    "statistic": "--statistic",
    # the figures
    "title": "--title",
    "style": "--style",
}

# parameter → flag; the gate rules' limits (max_kappa → --max-kappa, …) come from the metric registry
PARAM_FLAGS = MappingProxyType(
    {**_FLAGS, **{rule: metric.option for rule, metric in GATES.items() if metric.option is not None}}
)


def as_flags(text: str) -> str:
    """A note, description or reason of a report as this CLI prints it: the parameters it names as flags
    (`lam` → --lambda), as errors are shown."""
    return render(text, PARAM_FLAGS)
