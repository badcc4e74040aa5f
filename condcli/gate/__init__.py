"""The CI gate: ``condcli check`` rules, baselines, JUnit, and ``condcli compare``.

Everything here reads report dicts (the SPEC §7 JSON that ``condcli spectrum --json`` prints) and returns
typed results; nothing runs a model, prints, or imports typer/rich.
"""
