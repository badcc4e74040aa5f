"""--out holds what the last run wrote and nothing stale from condcli (issue 17, items 12 and 13): the files
of the previous run that this one does not write again go, the user's files stay, and staging folders of
dead runs (killed while writing, even by SIGKILL) are removed while a live run's are left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from condcli.cli.output import MANIFEST, OutputDir, Writer
from condcli.outpaths import clean_stale_staging, staging_prefix

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--max-samples", "2", "--batch-size", "2"]


def writer(files: dict[str, bytes]) -> Writer:
    def write(folder: Path) -> list[Path]:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return [folder / name for name in files]

    return write


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_rerun_with_layers_none_leaves_no_old_layers_plot(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "run"
    assert cli("spectrum", "vit-plain", *FAST, "--no-conditioned", "--out", str(out)).exit_code == 0
    assert (out / "layers.png").is_file()
    (out / "notes.txt").write_text("the user's")
    result = cli("spectrum", "vit-plain", *FAST, "--layers", "none", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert names(out) == [MANIFEST, "notes.txt", "report.html", "report.json", "spectrum.png"]
    assert json.loads((out / "report.json").read_text())["layers"] == []


def test_another_command_into_the_same_folder_replaces_the_whole_previous_output(tmp_path: Path) -> None:
    OutputDir(tmp_path, ("report.json", "spectrum.png", "layers.png")).write(
        writer({"report.json": b"spectrum", "spectrum.png": b"s", "layers.png": b"l"})
    )
    OutputDir(tmp_path, ("report.json", "sweep.png")).write(
        writer({"report.json": b"sweep", "sweep.png": b"w"})
    )
    assert names(tmp_path) == [MANIFEST, "report.json", "sweep.png"]
    assert (tmp_path / "report.json").read_bytes() == b"sweep"


def test_only_files_still_as_condcli_wrote_them_are_removed(tmp_path: Path) -> None:
    declared = ("report.json", "spectrum.png", "layers.png")
    OutputDir(tmp_path, declared).write(
        writer({"report.json": b"r", "spectrum.png": b"s", "layers.png": b"l"})
    )
    (tmp_path / "layers.png").write_bytes(b"edited by the user")  # theirs now
    OutputDir(tmp_path, declared).write(writer({"report.json": b"r2"}))
    assert names(tmp_path) == [MANIFEST, "layers.png", "report.json"]  # spectrum.png was condcli's: gone
    assert (tmp_path / "layers.png").read_bytes() == b"edited by the user"


@pytest.mark.parametrize(
    "manifest",
    [
        {"condcli": {"files": {"mine.txt": "0" * 64, "../outside.txt": "0" * 64, "/etc/passwd": "0" * 64}}},
        {"condcli": {"files": ["mine.txt"]}},
        "not json {",
        {"condcli": {"files": {"mine.txt": None}}},
    ],
    ids=["wrong-hashes-and-paths", "a-list", "garbage", "null-hash"],
)
def test_a_forged_or_broken_manifest_removes_nothing(manifest: object, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("the user's")
    (tmp_path / "outside.txt").write_text("the user's too")
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (out / MANIFEST).write_text(text)
    OutputDir(out, ("report.json",)).write(writer({"report.json": b"r"}))
    assert names(out) == [MANIFEST, "mine.txt", "report.json"]
    assert (tmp_path / "outside.txt").read_text() == "the user's too"


def test_a_stale_file_that_is_an_input_of_this_run_stays(tmp_path: Path) -> None:
    out = tmp_path / "out"
    OutputDir(out, ("report.json", "layers.png")).write(writer({"report.json": b"r", "layers.png": b"l"}))
    OutputDir(out, ("report.json",), [("--checkpoint", out / "layers.png")]).write(
        writer({"report.json": b"x"})
    )
    assert (out / "layers.png").read_bytes() == b"l"


def _staging(folder: Path, pid: int, start: int, host: str | None = None) -> Path:
    prefix = staging_prefix()
    own_host = prefix.split("-")[1]
    path = folder / f".condcli-{host or own_host}-{pid}-{start}-abc123"
    path.mkdir()
    (path / "report.json").write_text("half")
    return path


def _start(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])


def test_staging_folders_of_dead_runs_go_and_live_ones_stay(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = int(done.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = [
            _staging(tmp_path, dead, 12345),
            _staging(tmp_path, live.pid, _start(live.pid) + 1),
        ]  # reused pid
        kept = [
            _staging(tmp_path, live.pid, _start(live.pid)),
            _staging(tmp_path, os.getpid(), 0),
            _staging(tmp_path, dead, 12345, host="0badc0de"),  # another machine's (a shared folder)
        ]
        (tmp_path / ".condcli-x1y2z3").mkdir()  # an old-style name: whose it is cannot be told
        (tmp_path / ".condcli-user").write_text("a file, not a staging folder")
        assert sorted(clean_stale_staging(tmp_path)) == sorted(gone)
        assert all(p.is_dir() for p in kept) and not any(p.exists() for p in gone)
        assert (tmp_path / ".condcli-x1y2z3").is_dir() and (tmp_path / ".condcli-user").is_file()
    finally:
        live.kill()
        live.wait()


def test_a_run_killed_while_writing_leaves_staging_that_the_next_run_removes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from condcli.cli.output import OutputDir

        def write(folder):
            (folder / "report.json").write_text("half")
            os.kill(os.getpid(), signal.SIGKILL)

        OutputDir(Path({str(out)!r}), ("report.json",)).write(write)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    left = [p.name for p in out.iterdir()]
    assert len(left) == 1 and left[0].startswith(".condcli-")
    OutputDir(out, ("report.json",)).write(writer({"report.json": b"r"}))
    assert names(out) == [MANIFEST, "report.json"]


def test_a_dead_runs_junit_temporary_file_goes_with_the_next_junit(tmp_path: Path) -> None:
    from condcli.gate.junit import write_junit

    host = staging_prefix().split("-")[1]
    dead = tmp_path / f".condcli-{host}-{2**22 + 1}-7-abc.tmp"  # above the kernel's pid limit: never alive
    dead.write_text("half a junit")
    mine = tmp_path / f"{staging_prefix()}abc.tmp"
    mine.write_text("this process's")
    write_junit(tmp_path / "j.xml", b"<testsuites/>\n")
    assert names(tmp_path) == [mine.name, "j.xml"]


def test_a_report_may_go_beside_the_models_own_files_never_over_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A MODEL folder of the user's is what it holds: --out the folder itself or a new folder in it is
    fine (the model's files untouched), a name of the model's or a subfolder of it is refused."""
    import shutil

    from condcli.cli.main import main

    monkeypatch.chdir(tmp_path)
    shutil.copytree(Path(__file__).resolve().parents[1] / "condcli" / "sample_checkpoints" / "vit-plain", "m")
    (tmp_path / "m" / "extra").mkdir()
    model_files = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir() if p.is_file()}
    run = ["spectrum", "m", "--layers", "none", "--max-samples", "2", "--batch-size", "2"]
    assert main([*run, "--out", "m"]) == 0
    assert main([*run, "--out", "m/run"]) == 0
    assert (tmp_path / "m" / "report.json").is_file() and (tmp_path / "m" / "run" / "report.json").is_file()
    assert {p: (tmp_path / "m" / p).read_bytes() for p in model_files} == model_files
    capsys.readouterr()
    assert main(["check", "m", "--max-kappa", "1e9", "--junit", "m/config.json"]) == 2
    assert "would overwrite MODEL" in capsys.readouterr().err
    assert main([*run, "--out", "m/extra"]) == 2
    assert "lies inside MODEL" in capsys.readouterr().err
