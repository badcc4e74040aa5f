"""The command registry, as :mod:`condcli.reports.metrics` is for metrics: every command declared once.

A :class:`CommandDef` names what the layers above read by command: the report type, the ``condcli.<api>``
call, the terminal table printer, the HTML page's sections module, the figures ``--out`` and
``report.save()`` draw, the schema's definition and the ``--help`` examples. The page
(:data:`condcli.html.SECTIONS`), the schema (:data:`condcli.reports.schema.COMMANDS`), the help
(:data:`condcli.cli.examples.EXAMPLES`), the one writer (:data:`condcli.writing.report_files.PLOT_NAMES`) and
the package's lazy API (``condcli.spectrum``, …) loop over :data:`COMMANDS`. The modules are named, never
imported here: it is in the core, below them all (``tests/test_commands_registry.py`` checks each name), so
that the package's front door (``condcli/__init__.py``) reads it without loading anything.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandDef:
    """One command. A module is named by its dotted path (``module:Class`` for the report type); None where
    the command has none (``models`` writes no report, ``check`` draws no figure)."""

    name: str
    examples: tuple[str, ...]  # its --help Examples: command lines that run as shown
    cli: str = ""  # the module whose import registers its Typer command (default condcli.cli.<name>_cmd)
    report: str | None = None  # the report type (``module:Class``), a subclass of ReportViews
    api: str | None = None  # ``condcli.<api>``: its one call in Python (condcli.api)
    table: str | None = None  # the module whose ``render`` prints its table on a terminal (condcli.cli)
    sections: str | None = None  # the module whose ``sections(report)`` builds its page (condcli.html)
    # the figures --out, report.save() and report.plot() draw: file stem → ``module:builder``, a builder of
    # condcli.figures that turns the report into a description (None: nothing to draw), which condcli.plots
    # draws as the file and condcli.html as SVG
    figures: tuple[tuple[str, str], ...] = ()
    csv: tuple[str, ...] = ()  # the CSV tables its report adds (--csv, report.write_csv(), to_pandas())
    schema: str | None = None  # its definition in report.schema.json's $defs

    @property
    def plots(self) -> tuple[str, ...]:
        """The file stems of its figures, in order."""
        return tuple(stem for stem, _ in self.figures)


# in the order `condcli --help` lists them
COMMANDS: tuple[CommandDef, ...] = (
    CommandDef(
        "spectrum",
        (
            "condcli spectrum vit-plain",
            "condcli spectrum bert-docstrings --text lines.txt --layers 0,-1 --out runs/b",
            "condcli spectrum hf:bert-base-uncased --heads --json > report.json",
        ),
        report="condcli.reports.spectrum:SpectrumReport",
        api="spectrum",
        table="condcli.cli.spectrum_table",
        sections="condcli.html.sections_spectrum",
        figures=(
            ("spectrum", "condcli.figures.spectrum:spectrum"),
            ("layers", "condcli.figures.spectrum:layers"),
            ("embedding_table", "condcli.figures.embedding_table:embedding_table"),
        ),
        csv=("samples", "layers", "layer_samples", "heads", "spectrum"),
        schema="spectrum",
    ),
    CommandDef(
        "sweep-lambda",
        cli="condcli.cli.sweep_cmd",
        examples=(
            "condcli sweep-lambda vit-plain",
            "condcli sweep-lambda vit-plain --lambdas 1,2,5,10 --target-kappa 2 --out sw",
            "condcli sweep-lambda bert-docstrings --range 1 50 --steps 50 --layers 0,-1",
        ),
        report="condcli.reports.sweep:SweepReport",
        api="sweep_lambda",
        table="condcli.cli.sweep_table",
        sections="condcli.html.sections_sweep",
        figures=(("sweep", "condcli.figures.sweep:sweep"),),
        csv=("sweep", "sweep_layers"),
        schema="sweep-lambda",
    ),
    CommandDef(
        "rank-decay",
        (
            "condcli rank-decay vit-plain",
            "condcli rank-decay vit-plain --heads --index 8",
            "condcli rank-decay gpt2-docstrings --conditioned 10 --out runs/rank",
        ),
        report="condcli.reports.rank:RankDecayReport",
        api="rank_decay",
        table="condcli.cli.rank_table",
        sections="condcli.html.sections_rank",
        figures=(
            ("rank_decay", "condcli.figures.rank:curves"),
            ("rank_heatmap", "condcli.figures.rank:heatmap"),
        ),
        csv=("rank_decay", "rank_decay_curves", "rank_decay_heads"),
        schema="rank-decay",
    ),
    CommandDef(
        "check",
        (
            "condcli check vit-plain --max-kappa 100 --max-mu-la 50",
            "condcli check vit-plain --baseline base.json --tolerance 5% --junit ci.xml",
            "condcli check --config ci/condcli.toml --statistic max",
        ),
        report="condcli.gate.report:CheckReport",
        api="check",
        table="condcli.cli.check_table",
        sections="condcli.html.sections_check",
        csv=("checks",),
        schema="check",
    ),
    CommandDef(
        "compare",
        (
            "condcli compare vit-plain vit-conditioned",
            "condcli compare bert-docstrings gpt2-docstrings --text lines.txt --out cmp",
        ),
        report="condcli.gate.report:CompareReport",
        api="compare",
        table="condcli.cli.compare_table",
        sections="condcli.html.sections_compare",
        csv=("metrics",),
        schema="compare",
    ),
    CommandDef(
        "track",
        (
            "condcli track runs/bert/",
            "condcli track runs/bert/checkpoint-500 runs/bert/checkpoint-900 --out trk",
        ),
        report="condcli.reports.track:TrackReport",
        table="condcli.cli.track_table",
        sections="condcli.html.sections_track",
        figures=(("track", "condcli.figures.track:track"),),
        schema="track",
    ),
    CommandDef(
        "inspect",
        (
            "condcli inspect vit-plain",
            "condcli inspect hf:bert-base-uncased --weights random --json",
            "condcli inspect path/to/model.py:build --model-arg depth=4",
        ),
    ),
    CommandDef("models", ("condcli models", "condcli models --json")),
    CommandDef(
        "report", ("condcli report runs/report.json", "condcli report baseline.json -o baseline.html")
    ),
    CommandDef(
        "schema", ("condcli schema spectrum", "condcli schema > condcli-report.schema.json"), api="schema"
    ),
    CommandDef(
        "weights",
        ("condcli weights gpt2-docstrings", "condcli weights hf:gpt2 --heads --out runs/weights"),
        report="condcli.reports.weights:WeightsReport",
        api="weights",
        table="condcli.cli.weights_table",
        sections="condcli.html.sections_weights",
        figures=(("embedding_table", "condcli.figures.embedding_table:embedding_table"),),
        csv=("weights",),
        schema="weights",
    ),
)


def cli_module(c: CommandDef) -> str:
    """The module that registers ``c``'s Typer command."""
    return c.cli or f"condcli.cli.{c.name.replace('-', '_')}_cmd"


BY_NAME: dict[str, CommandDef] = {c.name: c for c in COMMANDS}
REPORTING: tuple[CommandDef, ...] = tuple(c for c in COMMANDS if c.schema is not None)
"""The commands that write a report (a schema definition, a page)."""
