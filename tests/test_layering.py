"""condcli's import graph: no cycles, imports only go downward (docs/design.md#layers), the core never
imports typer/rich.

The graph is read from the source (every import statement, also inside functions and ``TYPE_CHECKING``
blocks), so a lazy import cannot hide a cycle. Importing ``a.b.c`` from outside package ``a.b`` first runs
``a/b/__init__.py``: that edge is part of the graph too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "condcli"

# Top to bottom: a module may import modules of its own layer or of a lower one, never of a higher one
# (docs/design.md#layers). Each layer is a folder of condcli, but for the few top-level modules named here
# (the test below names any module that is in no layer).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # one call per command on a MODEL or an nn.Module; it never imports the CLI
    ("api", ("condcli.api",)),
    ("cli", ("condcli.__main__", "condcli.cli")),
    ("monitor", ("condcli.monitor",)),  # drives the analysis from inside a training loop
    ("gate", ("condcli.gate",)),  # check and compare: a library call that runs the analysis, then reads it
    ("analysis", ("condcli.analysis",)),
    # the one writer of a report's files (--out, --csv, report.save(), report.plot()) and the output folder
    # it writes into, below the API and the CLI that both call it
    ("writing", ("condcli.writing",)),
    ("readers of reports", ("condcli.plots", "condcli.html", "condcli.figures")),
    ("pipeline", ("condcli.loading", "condcli.inputs", "condcli.capture")),
    ("adapters", ("condcli.adapters",)),
    ("conditioning", ("condcli.conditioning",)),
    ("report", ("condcli.reports",)),
    (
        "core",
        (
            "condcli.spectra",
            "condcli.layout",
            "condcli.errors",
            "condcli.outpaths",
            "condcli.parsing",
            "condcli.distributed",
            "condcli.numbers",
            "condcli.commands",  # the command registry: declarations only, read by every layer above
            "condcli",
        ),
    ),
)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(name: str) -> Iterator[str]:
    """Dotted names ``name`` imports, relative imports resolved (a ``from`` import gives module.attr)."""
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _owner(dotted: str) -> str | None:
    """The condcli module that ``dotted`` (a module or a name in one) lives in."""
    while dotted not in modules():
        if "." not in dotted:
            return None
        dotted = dotted.rpartition(".")[0]
    return dotted


@cache
def graph() -> dict[str, frozenset[str]]:
    """module → the condcli modules importing it runs (the target and its packages' __init__ files)."""
    edges: dict[str, frozenset[str]] = {}
    for name in modules():
        targets = set()
        for dotted in imported_names(name):
            target = _owner(dotted) if dotted.split(".")[0] == "condcli" else None
            while target is not None:
                if target != name and not name.startswith(target + "."):
                    targets.add(target)
                target = target.rpartition(".")[0] or None
        edges[name] = frozenset(targets)
    return edges


def layer_of(name: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = name == prefix or (prefix != "condcli" and name.startswith(prefix + "."))
            if inside and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    return None if best is None else best[1]


def test_the_graph_is_read_from_the_source() -> None:
    edges = graph()
    assert "condcli.layout" in edges["condcli.conditioning"]
    assert "condcli.adapters" in edges["condcli.loading.sources"]  # the package itself, not only a submodule
    assert "condcli.adapters" in edges["condcli.capture"]  # via condcli.adapters.base: its __init__ runs
    assert "condcli.errors" in edges["condcli.spectra.core"]


def test_there_is_no_import_cycle() -> None:
    edges, state, stack = graph(), dict[str, str](), list[str]()

    def visit(name: str) -> None:
        state[name] = "open"
        stack.append(name)
        for target in sorted(edges[name]):
            if state.get(target) == "open":
                cycle = [*stack[stack.index(target) :], target]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name)


def test_every_module_has_a_layer() -> None:
    missing = sorted(name for name in modules() if layer_of(name) is None)
    assert not missing, f"put these modules into LAYERS in {Path(__file__).name}: {missing}"


def test_imports_only_go_downward() -> None:
    upward = []
    for name, targets in graph().items():
        for target in sorted(targets):
            here, there = layer_of(name), layer_of(target)
            if here is not None and there is not None and there < here:
                upward.append(f"{name} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize(
    ("package", "allowed"),
    [
        ("typer", ("condcli.cli", "condcli.__main__")),
        ("rich", ("condcli.cli",)),
        ("matplotlib", ("condcli.plots",)),
    ],
)
def test_ui_libraries_stay_in_their_layer(package: str, allowed: tuple[str, ...]) -> None:
    users = sorted(
        name
        for name in modules()
        if any(dotted.split(".")[0] == package for dotted in imported_names(name))
        and not any(name == a or name.startswith(a + ".") for a in allowed)
    )
    assert not users, f"{package} is imported outside {allowed}: {users}"


def test_the_neutral_and_pure_modules_import_nothing_above_them() -> None:
    edges = graph()
    assert edges["condcli.layout"] == frozenset()  # adapters, conditioning and capture all read it
    for name in (n for n in modules() if n.startswith("condcli.spectra")):
        assert {t for t in edges[name] if not t.startswith("condcli.spectra")} <= {"condcli.errors"}, name
    assert not {
        t for t in edges["condcli.conditioning"] if t.startswith(("condcli.adapters", "condcli.capture"))
    }


# Top-level modules outside any folder: the package, its entry point, the errors and number formatting every
# layer uses, the public training API (condcli.conditioning: user code imports it by that name), the
# capture hooks (the pipeline's one module beside loading/ and inputs/), and the core's small helpers.
TOP_LEVEL = {"__init__", "__main__", "errors", "numbers", "conditioning", "capture"}
TOP_LEVEL |= {"layout", "outpaths", "parsing", "distributed", "commands"}


def test_the_folders_are_the_layers() -> None:
    """Every module lives in a folder of its layer, but the few top-level modules named above."""
    loose = {p.stem for p in ROOT.glob("*.py")}
    assert loose == TOP_LEVEL, sorted(loose ^ TOP_LEVEL)
    folders = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    named = {m.split(".")[1] for _, ms in LAYERS for m in ms if m.count(".") == 1}
    assert folders <= named, sorted(folders - named)


def test_the_api_never_imports_the_cli() -> None:
    """Both call the library and the one writer of report files (condcli.writing); neither leans on the
    other (issue 40: the API wrote files through the CLI's output folder)."""
    back = sorted(
        f"{name} imports {target}"
        for name, targets in graph().items()
        if name == "condcli.api" or name.startswith("condcli.api.")
        for target in targets
        if target == "condcli.cli" or target.startswith("condcli.cli.")
    )
    assert not back, "\n".join(back)


# The package's front door: ``condcli.spectrum`` and the other one-call names resolve to condcli.api on first
# access (PEP 562 ``__getattr__``, so that ``import condcli`` loads no torch). It is the one module allowed to
# import a higher layer by name at run time.
FRONT_DOOR = {"condcli": {"condcli.api"}}


def dynamic_imports(name: str) -> Iterator[str]:
    """Module names ``name`` imports at run time by a string: the literal first argument of
    ``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``, and every string
    constant of the module that names a condcli module (a table of names handed to those calls), where the
    module calls one of them."""
    tree = ast.parse(modules()[name].read_text(encoding="utf-8"))
    calls = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                calls = True
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    yield first.value
    if calls:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules():
                yield node.value


def test_no_import_by_name_reaches_upward() -> None:
    """``importlib.import_module``/``__import__`` of a condcli module of a higher layer is a back edge that
    the import statements do not show (issue 40: reports/views reached condcli.api that way)."""
    upward = []
    for name in modules():
        allowed = FRONT_DOOR.get(name, set())
        for target in sorted(set(dynamic_imports(name))):
            owner = _owner(target)
            here, there = layer_of(name), None if owner is None else layer_of(owner)
            if here is not None and there is not None and there < here and owner not in allowed:
                upward.append(f"{name} ({LAYERS[here][0]}) imports {owner} ({LAYERS[there][0]}) by name")
    assert not upward, "\n".join(upward)


def test_an_import_by_name_is_seen() -> None:
    """The check above sees the front door's import of condcli.api by name (a table of module names)."""
    assert "condcli.api" in set(dynamic_imports("condcli"))


def test_the_registry_names_modules_of_their_layer() -> None:
    """The command registry's module names (imported by name by the layer that reads each) exist and belong
    to that layer: a page's sections to the readers of reports, a table printer to the CLI."""
    from condcli.commands import COMMANDS

    for c in COMMANDS:
        figures = [(builder.partition(":")[0], "condcli.figures") for _, builder in c.figures]
        for target, reader in ((c.sections, "condcli.html"), (c.table, "condcli.cli"), *figures):
            if target is not None:
                assert target in modules(), target
                assert layer_of(target) == layer_of(reader), f"{c.name}: {target}"
