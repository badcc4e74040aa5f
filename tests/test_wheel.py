"""condcli as a user gets it: the sdist holds the whole project, the wheel built from it carries what a first
run needs (the samples, the JSON Schema, the licence), and installed into a fresh virtual environment it
follows the README from an empty folder: the demo command, the tour, the Python snippet, the LLM section, the
notebook, `condcli models` and `condcli compare a.json b.json` of two saved reports. Printed blocks are
compared with the README's at the precision each number claims, as tests/test_docs_blocks.py does.

The build runs once per session (a module fixture, about half a minute); tests/wheel_venv.py builds and
installs, offline (pip --no-index), reusing this environment's dependencies.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sysconfig
from importlib.metadata import version
from pathlib import Path

import pytest

from docs import regenerate as rg
from tests.test_docs_blocks import assert_same_block
from tests.wheel_venv import (
    ROOT,
    FreshVenv,
    build_sdist,
    build_wheel,
    fresh_venv,
    sdist_files,
    wheel_files,
)

README = (ROOT / "README.md").read_text(encoding="utf-8")
SHOWN = rg.shown(README)  # the printed blocks of the README: id → texts
SAMPLES = ROOT / "condcli" / "sample_checkpoints"
MAKE = re.compile(r"\bmake\s+(samples|demo|test|install|lint|bench|clean)\b|\bMakefile\b")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    """The sdist of the checkout, the wheel built from it, installed into a new venv."""
    build = tmp_path_factory.mktemp("wheel-build")
    sdist, project = build_sdist(build)
    wheel = build_wheel(sdist, build / "wheel")
    return fresh_venv(build / "venv", wheel, sdist, project)


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    """An empty folder outside the checkout, as a new user's."""
    assert not tmp_path.resolve().is_relative_to(ROOT) and not any(tmp_path.iterdir())
    return tmp_path


def _installed(venv: FreshVenv) -> Path:
    """The installed package's folder, as the venv's Python imports it."""
    where = venv.run([str(venv.python), "-c", "import condcli; print(condcli.__file__)"], venv.folder)
    assert where.returncode == 0, where.stderr
    return Path(where.stdout.strip()).parent


def test_the_sdist_holds_the_whole_project(venv: FreshVenv) -> None:
    """Every file of the project (the tree less what .gitignore ignores) is in the sdist: conftest, helpers,
    golden reports, docs, examples, samplegen, bench, Makefile, LICENSE; `make test` runs from it."""
    held = sdist_files(venv.sdist)
    missing = sorted(set(venv.project) - held)
    assert not missing, f"the sdist lacks {len(missing)} project files: {missing[:20]}"
    for file in ("LICENSE", "Makefile", "tests/conftest.py", "tests/helpers.py", "PKG-INFO"):
        assert file in held, file
    assert not any(f.startswith((".venv/", ".git/")) or "__pycache__" in f for f in held)


def test_the_wheel_carries_the_samples_schema_and_licence(venv: FreshVenv) -> None:
    names = wheel_files(venv.wheel)
    samples = [p for p in SAMPLES.iterdir() if (p / "config.json").is_file()]
    assert samples, f"no samples in {SAMPLES}"
    for sample in samples:  # every file of every sample there is today
        for file in sample.iterdir():
            assert f"condcli/sample_checkpoints/{sample.name}/{file.name}" in names, file
    assert "condcli/reports/schemas/report.schema.json" in names
    dist_info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
    assert f"{dist_info}/licenses/LICENSE" in names
    assert {n.split("/")[0] for n in names} == {"condcli", dist_info}  # no tests/, samplegen/, docs/ …
    size = venv.wheel.stat().st_size
    print(f"wheel {venv.wheel.name}: {size / 1e6:.1f} MB, {len(names)} files")


def test_the_installed_package_is_the_wheels_and_the_checkout_is_not_importable(
    venv: FreshVenv, empty: Path
) -> None:
    code = (
        "import condcli, importlib.util, json, sys\n"
        "from condcli.loading.samples import samples_dir\n"
        "print(json.dumps({'file': condcli.__file__, 'path': sys.path, 'samples': str(samples_dir()),\n"
        "    'samplegen': importlib.util.find_spec('samplegen') is not None}))\n"
    )
    done = venv.run([str(venv.python), "-c", code], empty)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["file"]).resolve().is_relative_to(venv.folder.resolve()), seen["file"]
    assert Path(seen["samples"]).resolve().is_relative_to(venv.folder.resolve()), seen["samples"]
    borrowed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}  # the .pth's
    inside = [p for p in seen["path"] if p and Path(p).resolve().is_relative_to(ROOT)]
    assert all(Path(p).resolve() in borrowed for p in inside), inside  # this environment's packages only
    assert not seen["samplegen"]  # the source tree is not importable


def test_no_message_in_the_wheel_tells_a_pip_user_to_run_make(venv: FreshVenv) -> None:
    """Every string in the installed code (messages, hints, --help docstrings) is free of `make …`: a pip
    user has no Makefile."""
    found = []
    for file in sorted(_installed(venv).rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MAKE.search(node.value):
                found.append(f"{file.name}:{node.lineno}: {node.value[:80]!r}")
    assert not found, "\n".join(found)


@pytest.fixture(scope="module")
def demo(venv: FreshVenv, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's first command (`make demo`: condcli spectrum --out demo-output) from an empty folder."""
    folder = tmp_path_factory.mktemp("demo")
    done = venv.run([str(venv.condcli), "spectrum", "--out", "demo-output"], folder, **rg.TERMINAL)
    assert done.returncode == 0, done.stderr
    return folder, done.stdout


def test_the_first_command_prints_the_readme_table_and_writes_its_files(demo: tuple[Path, str]) -> None:
    folder, stdout = demo
    (page,) = SHOWN["demo"]
    printed = "\n".join(line.rstrip() for line in stdout.rstrip("\n").splitlines())
    assert_same_block(page, printed, "README demo (from the wheel)")
    assert sorted(p.name for p in (folder / "demo-output").iterdir()) == [
        ".condcli-manifest.json",
        "layers.png",
        "report.html",
        "report.json",
        "spectrum.png",
    ]


def _python_snippet() -> str:
    """The README's Python code, as the page shows it (above its printed block)."""
    found = re.search(r"```python\n(.*?)```\n\nprints\n\n<!-- python:begin -->", README, re.S)
    assert found is not None, "the README lost its Python snippet"
    return found.group(1)


@pytest.mark.parametrize("name", sorted(set(SHOWN) - {"demo"}))
def test_every_readme_block_prints_the_same_from_the_wheel(name: str, venv: FreshVenv, empty: Path) -> None:
    """The tour (sweep-lambda, check), the Python snippet and the LLM section, each run from an empty folder
    by the installed condcli. A block whose page builds its input first (docs/regenerate.py SETUPS) gets
    that input built into the folder."""
    block = rg.BLOCKS[name]
    if block.setup is not None:
        rg.SETUPS[block.setup](empty)
    if block.python is not None:
        done = venv.run([str(venv.python), "-c", _python_snippet()], empty)
    else:
        done = venv.run([str(venv.condcli), *block.argv], empty, **{**rg.TERMINAL, **block.env})
    assert done.returncode == block.code, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = [ln.rstrip() for ln in done.stdout.replace(str(empty) + os.sep, "").rstrip("\n").splitlines()]
    printed = "\n".join(block.keep(lines) if block.keep else lines)
    for page in SHOWN[name]:
        assert_same_block(page, printed, f"README {name} (from the wheel)")


def test_the_tours_rank_decay_writes_its_report(venv: FreshVenv, empty: Path) -> None:
    said = re.search(r"`condcli (rank-decay [^`]*)`", README)
    assert said is not None, "the tour lost its rank-decay command"
    done = venv.run([str(venv.condcli), *said.group(1).split()], empty)
    assert done.returncode == 0, done.stderr
    report = json.loads((empty / "rank" / "report.json").read_text(encoding="utf-8"))
    assert report["command"] == "rank-decay"
    assert any(p.suffix == ".png" for p in (empty / "rank").iterdir())


def test_models_lists_the_installed_samples(venv: FreshVenv, empty: Path) -> None:
    done = venv.run([str(venv.condcli), "models"], empty)
    assert done.returncode == 0, done.stderr
    for sample in SAMPLES.iterdir():
        if (sample / "config.json").is_file():
            assert f"│ {sample.name} " in done.stdout, sample.name
    said = " ".join(done.stdout.split())  # text lines wrap at the width
    assert f"in {_installed(venv) / 'sample_checkpoints'};" in said
    assert not MAKE.search(said)


def test_compare_of_two_saved_reports(venv: FreshVenv, demo: tuple[Path, str], empty: Path) -> None:
    """`condcli compare a.json b.json` (issue 39): the demo's report.json against a saved report of the
    conditioned sample; the κ(X) row shows each report's median and their ratio."""
    shutil.copy(demo[0] / "demo-output" / "report.json", empty / "a.json")
    saved = venv.run([str(venv.condcli), "spectrum", "vit-conditioned", "--json"], empty)
    assert saved.returncode == 0, saved.stderr
    (empty / "b.json").write_text(saved.stdout, encoding="utf-8")
    done = venv.run([str(venv.condcli), "compare", "a.json", "b.json"], empty)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    a, b = (json.loads((empty / f).read_text())["embedding"]["kappa"]["median"] for f in ("a.json", "b.json"))
    row = next((ln for ln in done.stdout.splitlines() if ln.startswith("│ κ(X) ")), None)
    assert row is not None, done.stdout
    cells = [c.strip() for c in row.split("│")[2:-1]]
    assert cells[:3] == [f"{a:.3g}", f"{b:.3g}", f"{b / a:.3g}"], row


def test_the_example_notebook_runs_on_the_installed_package(venv: FreshVenv, empty: Path) -> None:
    """examples/notebook.ipynb, headless (nbclient) in a kernel of the new venv's Python; a last cell added
    here shows which condcli the kernel imported."""
    notebook = json.loads((ROOT / "examples" / "notebook.ipynb").read_text(encoding="utf-8"))
    probe = "import condcli\nprint(condcli.__file__)"
    notebook["cells"].append(
        {"cell_type": "code", "metadata": {}, "source": probe, "outputs": [], "execution_count": None}
    )
    (empty / "notebook.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    script = (
        "import nbclient, nbformat\n"
        "nb = nbformat.read('notebook.ipynb', as_version=4)\n"
        "nbclient.NotebookClient(nb, timeout=300, kernel_name='python3').execute()\n"
        "nbformat.write(nb, 'notebook.ipynb')\n"
    )
    jupyter = empty / ".jupyter-data"  # no kernel spec of the user's: the venv's own Python runs the kernel
    done = venv.run([str(venv.python), "-c", script], empty, JUPYTER_DATA_DIR=str(jupyter))
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads((empty / "notebook.ipynb").read_text(encoding="utf-8"))
    for i, cell in enumerate(ran["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"], f"cell {i} shows nothing"
            assert not any(o["output_type"] == "error" for o in cell["outputs"]), i
    shown = "".join(ran["cells"][-1]["outputs"][0]["text"])
    assert Path(shown.strip()).resolve().is_relative_to(venv.folder.resolve()), shown


def test_without_its_samples_condcli_says_what_a_pip_user_can_do(venv: FreshVenv, empty: Path) -> None:
    """Samples gone (a damaged install) or $CONDCLI_SAMPLES pointing at an empty folder: the hint is
    reinstalling condcli or unsetting the variable, never `make`; the first command fails in one line."""
    pointed = venv.run([str(venv.condcli), "models"], empty, CONDCLI_SAMPLES=str(empty))
    assert pointed.returncode == 0, pointed.stderr
    assert "unset CONDCLI_SAMPLES" in " ".join(pointed.stdout.split()), pointed.stdout
    installed = _installed(venv) / "sample_checkpoints"
    aside = installed.with_name("sample_checkpoints.aside")
    installed.rename(aside)
    try:
        models = venv.run([str(venv.condcli), "models"], empty)
        first = venv.run([str(venv.condcli), "spectrum"], empty)
    finally:
        aside.rename(installed)
    assert models.returncode == 0, models.stderr
    said = " ".join(models.stdout.split())  # text lines wrap at the width
    assert "pip install --force-reinstall --no-deps condcli" in said, models.stdout
    assert first.returncode == 2 and first.stderr.count("\n") == 1, first.stderr
    for text in (" ".join(t.split()) for t in (pointed.stdout, models.stdout, first.stderr)):
        assert not MAKE.search(text) and "samplegen" not in text and "Traceback" not in text, text


def test_the_install_left_this_environment_alone(venv: FreshVenv) -> None:
    """The fresh venv borrows this environment's packages read-only: pip did not uninstall condcli here."""
    import condcli

    assert Path(condcli.__file__).resolve().is_relative_to(ROOT / "condcli")
    assert version("condcli") == condcli.__version__
