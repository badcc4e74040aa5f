"""Library errors name the Python parameter; the CLI shows the same error with its flag (cli/flags.py)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from click.testing import Result

from condcli.analysis.sweep import lambda_grid
from condcli.cli.flags import PARAM_FLAGS
from condcli.cli.main import error_line
from condcli.conditioning import Conditioning
from condcli.errors import PARAM, CondcliError, InputError, InternalError, UsageError, render
from condcli.inputs.batches import InputSpec
from condcli.loading.devices import resolve_device

ROOT = Path(__file__).resolve().parent.parent / "condcli"
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def test_marked_parameters_render_as_python_names_or_as_flags() -> None:
    text = "`lam` must be finite — e.g. `lam=10`, with `conditioned=True` (see ``not_a_param``)"
    assert render(text) == "lam must be finite — e.g. lam=10, with conditioned=True (see ``not_a_param``)"
    flags = {"lam": "--lambda", "conditioned": "--conditioned"}
    assert render(text, flags) == (
        "--lambda must be finite — e.g. --lambda 10, with --conditioned (see ``not_a_param``)"
    )
    assert render("`unmapped=3`", flags) == "unmapped=3"  # no flag for it: the parameter as written
    error = UsageError("`value_range=1 20`: LO must be smaller than HI", "e.g. `lambdas=10`")
    assert str(error) == error.line() == "value_range=1 20: LO must be smaller than HI — e.g. lambdas=10"
    assert error.params == ("value_range", "lambdas")


def _raised(call: Callable[[], object]) -> CondcliError:
    with pytest.raises(CondcliError) as e:
        call()
    return e.value


# (library call, what str() of its error says, the CLI arguments that raise it, what the CLI prints)
CASES = [
    (
        lambda: InputSpec(batch_size=0),
        "batch_size must be at least 1, got 0 — e.g. batch_size=8",
        ["spectrum", "vit-plain", "--batch-size", "0"],
        "--batch-size must be at least 1, got 0 — e.g. --batch-size 8",
    ),
    (
        lambda: resolve_device("cuda:3"),
        "device=cuda:3: CUDA is not available on this machine — use device=cpu or auto",
        ["spectrum", "vit-plain", "--device", "cuda:3"],
        "--device cuda:3: CUDA is not available on this machine — use --device cpu or auto",
    ),
    (
        lambda: lambda_grid((1.0, 20.0), None, [1.0]),
        "value_range and lambdas were both given — give a range (value_range=LO HI [steps=N])"
        " or a list (lambdas=1,2,5,10), not both",
        ["sweep-lambda", "vit-plain", "--range", "1", "20", "--lambdas", "1"],
        "--range and --lambdas were both given — give a range (--range LO HI [--steps N])"
        " or a list (--lambdas 1,2,5,10), not both",
    ),
]


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    yield


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize(("call", "python", "args", "shown"), CASES, ids=["batch_size", "device", "range"])
def test_a_library_error_names_the_parameter_and_the_cli_its_flag(
    cli: Callable[..., Result], call: Callable[[], object], python: str, args: list[str], shown: str
) -> None:
    error = _raised(call)
    assert str(error) == python and "--" not in str(error)
    result = cli(*args)
    assert result.exit_code == error.exit_code == 2
    assert result.stderr.strip() == f"error: {shown}"


def test_lambda_is_lam_in_python_and_dash_dash_lambda_on_the_command_line(cli: Callable[..., Result]) -> None:
    error = _raised(lambda: Conditioning(float("nan")))
    assert str(error) == "lam must be a finite number, got nan — pass e.g. lam=10"
    assert error_line(error) == "--lambda must be a finite number, got nan — pass e.g. --lambda 10"
    result = cli("spectrum", "vit-plain", "--lambda", "nan")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --lambda must be a finite number ≥ 0, got nan — e.g. --lambda 10"


def test_the_cli_adds_how_to_see_an_internal_errors_traceback() -> None:
    assert str(InternalError("a NaN reached the report", "report this as a bug")).endswith("as a bug")
    line = error_line(InternalError("a NaN reached the report", "report this as a bug"))
    assert line == "a NaN reached the report — report this as a bug (rerun with --debug for the traceback)"
    assert error_line(InputError("`images=x`: no such folder")) == "--images x: no such folder"


def _library_strings() -> Iterator[tuple[str, int, str]]:
    """(module path, line, text) of every string constant outside condcli/cli, docstrings excluded."""
    for path in sorted(ROOT.rglob("*.py")):
        if path.relative_to(ROOT).parts[0] == "cli":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                yield str(path.relative_to(ROOT.parent)), node.lineno, node.value


def test_every_parameter_a_library_message_marks_has_a_flag() -> None:
    # condcli/api's own parameters (`tokenizer`, `inputs`) exist in Python only: the CLI never shows them;
    # nor `folder`, of report.save(folder) and report.write_csv(folder) (the CLI's are --out and --csv)
    marked = {
        (name, f"{where}:{line}")
        for where, line, text in _library_strings()
        if not where.startswith("condcli/api/")
        for name in (m.group(1) for m in PARAM.finditer(text))
        if name != "folder"
    }
    assert {"lam", "layers", "dtype", "checkpoint", "weights", "max_samples"} <= {name for name, _ in marked}
    unmapped = sorted(f"{where}: {name}" for name, where in marked if name not in PARAM_FLAGS)
    assert not unmapped, "add these parameters to PARAM_FLAGS in condcli/cli/flags.py: " + ", ".join(unmapped)


def _raise_strings() -> Iterator[tuple[str, int, str]]:
    """String constants inside ``raise`` statements outside condcli/cli."""
    for path in sorted(ROOT.rglob("*.py")):
        if path.relative_to(ROOT).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        yield str(path.relative_to(ROOT.parent)), sub.lineno, sub.value


def test_no_library_error_spells_a_flag() -> None:
    """A whole command line ("condcli spectrum --json > baseline.json") is an instruction, not a flag."""
    found = [
        f"{where}:{line}: {text!r}"
        for where, line, text in _raise_strings()
        if FLAG.search(re.sub(r"(condcli [a-z-]+|pip install|huggingface-cli download)[^,;()]*", "", text))
    ]
    assert not found, "name the parameter in backticks instead:\n" + "\n".join(found)


def test_no_library_string_spells_a_flag() -> None:
    """Notes, descriptions, reasons and warnings a report carries name parameters too (`images`, `lam`): the
    CLI prints them as flags (condcli.cli.flags.as_flags), the JSON and a notebook read the parameter."""
    the_cli = (
        "condcli/__main__.py",
        "condcli/html/assets.py",
        "condcli/commands.py",
    )  # own flags; CSS; --help examples
    found = [
        f"{where}:{line}: {text!r}"
        for where, line, text in _library_strings()
        if where not in the_cli
        and FLAG.search(re.sub(r"(condcli [a-z-]+|pip install|huggingface-cli download)[^,;()]*", "", text))
    ]
    assert not found, "name the parameter in backticks instead:\n" + "\n".join(found)
