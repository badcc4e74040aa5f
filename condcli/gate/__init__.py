"""The CI gate as a library: :func:`check` a model (or a saved report) on limits and a baseline, and
:func:`compare` two; ``condcli check`` and ``condcli compare`` parse, call these and render.

The rules, baselines, JUnit and the comparison read report dicts (a spectrum report's JSON, as ``to_json``
gives it) and return typed results; :func:`check` and :func:`compare` run the analysis first where given a
model. Nothing here prints or imports typer/rich.
"""

from condcli.gate.checking import CheckPlan, check, plan_check
from condcli.gate.comparing import ComparePlan, compare, plan_compare
from condcli.gate.report import CheckReport, CompareReport

__all__ = [
    "CheckPlan",
    "CheckReport",
    "ComparePlan",
    "CompareReport",
    "check",
    "compare",
    "plan_check",
    "plan_compare",
]
