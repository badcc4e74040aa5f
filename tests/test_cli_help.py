"""Help that reads, on every command: options grouped in panels, flags shown as flags, fixed choices shown
as choices (the library's own lists), every option name whole in an 80-column help, Examples at the end
that parse, and no option listed that the command refuses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, get_args

import pytest
import typer
from click.testing import Result
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from condcli.cli import app
from condcli.cli.examples import EXAMPLES
from condcli.cli.help_format import PANELS


def _group() -> TyperGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return group


GROUP = _group()
COMMANDS = tuple(GROUP.commands)
ANALYSES = ("spectrum", "sweep-lambda", "rank-decay", "check", "compare", "track", "inspect")


def help_text(*args: str, columns: int = 80) -> str:
    """The help at ``columns`` wide (typer reads TERMINAL_WIDTH once, at import: set it for this call)."""
    import typer.rich_utils

    before = typer.rich_utils.MAX_WIDTH
    typer.rich_utils.MAX_WIDTH = columns
    try:
        result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(columns)})
    finally:
        typer.rich_utils.MAX_WIDTH = before
    assert result.exit_code == 0, result.output
    return result.stdout


def listed(name: str) -> list[TyperOption]:
    """The options the command's --help lists (hidden ones are not)."""
    return [p for p in GROUP.commands[name].params if isinstance(p, TyperOption) and not p.hidden]


def choices(option: TyperOption) -> tuple[str, ...] | None:
    """The fixed choices of an option: its Literal's values, or the ones its metavar lists."""
    if option.type_descriptor.is_choice:
        return tuple(str(c) for c in option.type_descriptor.choices or ())
    if option.metavar and "|" in option.metavar:
        return tuple(option.metavar.strip("<>").split("|"))
    return None


def test_every_analysis_command_is_registered() -> None:
    assert set(ANALYSES) <= set(COMMANDS)
    assert set(COMMANDS) <= set(EXAMPLES)


@pytest.mark.parametrize("name", COMMANDS)
def test_options_are_grouped_in_panels(name: str) -> None:
    options = listed(name)
    for option in options:
        if option.opts != ["--help"] and "-h" not in option.opts:
            assert getattr(option, "rich_help_panel", None) in PANELS, (name, option.opts)
    text = help_text(name, columns=120)
    titles = re.findall(r"╭─ (\w+) ─", text)
    assert set(titles) <= {"Arguments", "Options", *PANELS}, titles
    assert len(titles) == len(set(titles)), titles  # each panel once
    shown = [t for t in titles if t in PANELS]
    assert shown == sorted(shown, key=PANELS.index)  # in the panels' order
    if len(options) > 3:
        assert len(shown) >= 2, (name, titles)


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_flags_are_shown_as_flags(name: str | None) -> None:
    text = help_text(*([name] if name else []), columns=120)
    assert "<bool>" not in text
    params = GROUP.params if name is None else GROUP.commands[name].params
    for option in (p for p in params if isinstance(p, TyperOption) and p.is_flag):
        flag = re.escape(option.opts[0])
        (line,) = [line for line in text.splitlines() if re.match(rf"│ +{flag}(?![\w-])", line)]
        assert not re.search(r"<\w+>", line), line  # no value type beside a flag


def _library_choices() -> dict[str, tuple[str, ...]]:
    from condcli.gate.metrics import STATISTICS
    from condcli.loading.big_model import STRATEGIES
    from condcli.loading.devices import DTYPES
    from condcli.plots import FORMATS, STYLES

    return {
        "--format": tuple(FORMATS),
        "--style": tuple(STYLES),
        "--statistic": tuple(STATISTICS),
        "--dtype": tuple(DTYPES),
        "--device-map": tuple(STRATEGIES),
        "--weights": ("pretrained", "random"),
        "--device": ("auto", "cpu", "cuda", "cuda:N"),
    }


@pytest.mark.parametrize("name", COMMANDS)
def test_fixed_choices_are_listed_as_the_library_has_them(name: str) -> None:
    library = _library_choices()
    text = " ".join(help_text(name, columns=200).split())
    for option in listed(name):
        flag = option.opts[0]
        if flag in library:
            assert choices(option) == library[flag], (name, flag)
            assert "<" + "|".join(library[flag]) + ">" in text, (name, flag)


def test_fixed_choices_reach_the_library_as_typed(cli: Any) -> None:
    # the library's one-line error names the flag and the choices (not a second wording from click)
    result = cli("spectrum", "./no-such-model/", "--format", "gif")
    assert result.exit_code == 2 and "--format 'gif' is not known" in result.stderr


@pytest.mark.parametrize("name", COMMANDS)
def test_examples_end_the_help_and_parse(name: str) -> None:
    text = help_text(name)
    assert "Examples" in text.split("╰")[-1]  # after the last panel
    flat = " ".join(text.split())
    command = GROUP.commands[name]
    assert 2 <= len(EXAMPLES[name]) <= 3
    for line in EXAMPLES[name]:
        assert len(line) <= 76, line  # one line in an 80-column help
        assert " ".join(line.split()) in flat, line
        words = shlex.split(line)
        assert words[:2] == ["condcli", name]
        args = words[2 : words.index(">")] if ">" in words else words[2:]
        command.make_context(name, args)  # every option exists and takes the value shown


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_every_option_name_is_whole_at_80_columns(name: str | None) -> None:
    text = help_text(*([name] if name else []), columns=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    params = GROUP.params if name is None else GROUP.commands[name].params
    for option in (p for p in params if isinstance(p, TyperOption) and not p.hidden):
        for flag in (*option.opts, *option.secondary_opts):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w…-])", text), (name, flag)
    assert not re.search(r"--[\w-]*…", text)


def _value(option: TyperOption) -> list[str]:
    """A value of the option's type (the command is stopped before any work by a MODEL that is not there)."""
    if option.is_flag:
        return []
    found = choices(option)
    if found:
        return [found[0]]
    if option.nargs == 2:
        return ["1", "2"]
    kind = option.type_descriptor.annotation
    kinds = {a for a in (kind, *get_args(kind)) if a is not type(None)}
    return ["1"] if kinds & {int, float} else ["x"]


@pytest.mark.parametrize("name", ANALYSES)
def test_no_listed_option_is_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    where = ["./no-such-model/"] if name != "compare" else ["./no-such-a/", "./no-such-b/"]
    for option in listed(name):
        if option.opts[0] == "--help":
            continue
        result: Result = cli(name, *where, option.opts[0], *_value(option))
        assert "does not apply" not in result.output + result.stderr, (name, option.opts)
        assert "No such option" not in result.output + result.stderr, (name, option.opts)
        assert result.exit_code == 2, (name, option.opts, result.output)


def test_the_bundle_agrees_with_the_library() -> None:
    from condcli.analysis import runs
    from condcli.cli import options as o

    assert o.MAX_SEED == runs.MAX_SEED
    assert {c.name for c in o.COMMON} | {"model"} == set(runs.RunOptions.__dataclass_fields__)
