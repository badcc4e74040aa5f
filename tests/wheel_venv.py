"""Build condcli as it ships (sdist, then the wheel from the sdist, as ``python -m build`` does) and install
the wheel into a fresh virtual environment that reuses this environment's dependencies: nothing is
downloaded (``pip --no-index``), and neither the checkout nor its editable install is on the new sys.path.

Used by tests/test_wheel.py; every step runs in a subprocess, outside the checkout.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # seconds for any one step; a step that hangs fails the test instead of the CI job


def _ignore_rules(root: Path) -> list[str]:
    """The project's .gitignore patterns (simple ones: no negation), plus .git itself."""
    file = root / ".gitignore"
    lines = file.read_text(encoding="utf-8").splitlines() if file.is_file() else []
    return [".git/", *(ln.strip() for ln in lines if ln.strip() and not ln.startswith(("#", "!")))]


def _ignored(rel: str, is_dir: bool, rules: list[str]) -> bool:
    """Whether the path ``rel`` (relative, with '/') matches a .gitignore rule."""
    for rule in rules:
        if rule.endswith("/") and not is_dir:
            continue
        pattern = rule.strip("/")
        if "/" in rule.rstrip("/"):  # anchored at the root: the whole relative path must match
            if fnmatch.fnmatchcase(rel, pattern):
                return True
        elif fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern):
            return True
    return False


def project_files(root: Path = ROOT) -> list[str]:
    """Every file of the project as a clone holds it (relative paths): the tree without what .gitignore
    ignores (the virtual environment, caches, build outputs)."""
    rules = _ignore_rules(root)
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root).as_posix()
        prefix = "" if here == "." else here + "/"
        dirs[:] = sorted(d for d in dirs if not _ignored(prefix + d, True, rules))
        found.extend(prefix + f for f in sorted(files) if not _ignored(prefix + f, False, rules))
    return found


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def build_sdist(out: Path, root: Path = ROOT) -> tuple[Path, list[str]]:
    """The sdist of a copy of the project's files (the checkout itself is never written to), and the files
    copied."""
    src = out / "src"
    files = project_files(root)
    for rel in files:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, src / rel)
    hook = "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])"
    _run([sys.executable, "-c", hook, str(out / "dist")], cwd=src)
    (sdist,) = (out / "dist").glob("condcli-*.tar.gz")
    return sdist, files


def sdist_files(sdist: Path) -> set[str]:
    """The files in the sdist, relative to its top folder."""
    with tarfile.open(sdist) as tar:
        return {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name}


def build_wheel(sdist: Path, out: Path) -> Path:
    """The wheel built from the sdist by pip, offline, with this environment's setuptools."""
    out.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    _run([*pip, "--wheel-dir", str(out), str(sdist)], cwd=out)
    (wheel,) = out.glob("condcli-*.whl")
    return wheel


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


@dataclass(frozen=True)
class FreshVenv:
    """A new virtual environment with the wheel installed."""

    folder: Path
    wheel: Path
    sdist: Path
    project: tuple[str, ...]  # the project's files the sdist was built from

    @property
    def bin(self) -> Path:
        return self.folder / ("Scripts" if os.name == "nt" else "bin")

    @property
    def python(self) -> Path:
        return self.bin / ("python.exe" if os.name == "nt" else "python")

    @property
    def condcli(self) -> Path:
        return self.bin / ("condcli.exe" if os.name == "nt" else "condcli")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a new user's shell has: this venv first on PATH, nothing of the checkout's
        (no PYTHONPATH, no $CONDCLI_SAMPLES), offline."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDCLI_SAMPLES", "COLUMNS", "LINES")
        }
        env.update(
            PATH=os.pathsep.join([str(self.bin), env.get("PATH", "")]),
            VIRTUAL_ENV=str(self.folder),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            MPLBACKEND="Agg",
        )
        env.update(extra)
        return env

    def run(self, argv: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        """``argv`` (its first item: this venv's condcli or python) in ``cwd``; any exit code."""
        return subprocess.run(
            argv, cwd=cwd, env=self.env(**extra), capture_output=True, text=True, timeout=TIMEOUT
        )


def fresh_venv(folder: Path, wheel: Path, sdist: Path, project: list[str]) -> FreshVenv:
    """``python -m venv`` (no pip), a .pth that appends this environment's site-packages (a plain path: the
    .pth files there, among them the editable install's finder, are not run), then the wheel installed by
    pip with ``--no-index``: pip checks that every dependency is already there and downloads nothing."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(folder)], cwd=folder.parent)
    venv = FreshVenv(folder, wheel, sdist, tuple(project))
    query = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(venv.python), "-c", query], cwd=folder).stdout.strip())
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "_condcli_test_dependencies.pth").write_text("\n".join(ours) + "\n", encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "--python", str(venv.python), "install", "--no-index"]
    _run([*pip, "--no-input", str(wheel)], cwd=folder)
    return venv
