"""The CI gate: ``condcli check`` rules, baselines, JUnit, and ``condcli compare``.

Everything here reads report dicts (a spectrum report's SPEC §7 JSON, as ``to_json`` gives it) and returns
typed results; nothing runs a model, prints, or imports typer/rich.
"""
