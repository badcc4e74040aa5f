"""Where condcli writes (issue 17): only regular files, never over what the run reads, checked before any
work, swapped in all or nothing, nothing stale from condcli left in --out, no staging folder of a dead run.

Each test is an independent check on the file system (bytes, file types, folder listings), never on
condcli's own report of what it did.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import condcli.cli.output as output
from condcli.cli.main import main
from condcli.cli.output import OutputDir
from condcli.errors import UsageError
from condcli.gate.junit import check_junit_path, write_junit

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--max-samples", "2", "--batch-size", "2"]
NAMES = ("report.json", "spectrum.png", "layers.png")


def listing(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry of ``folder`` (recursively): its mode and, for a file, its bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
        found[str(path.relative_to(folder))] = (info.st_mode, data)
    return found


def writer(files: dict[str, bytes]) -> output.Writer:
    def write(folder: Path) -> list[Path]:
        paths = []
        for name, data in files.items():
            (folder / name).write_bytes(data)
            paths.append(folder / name)
        return paths

    return write


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


@pytest.fixture(scope="module")
def baseline(cli_json: Callable[..., dict[str, Any]]) -> bytes:
    return json.dumps(
        cli_json("spectrum", "vit-plain", *FAST, "--layers", "none", "--no-conditioned")
    ).encode()


# 1. only regular files are written


def test_junit_refuses_a_fifo_and_a_link_to_a_device_and_leaves_them(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "null"
    link.symlink_to(os.devnull)  # only checked here: nothing is ever written through it
    with pytest.raises(UsageError, match="is a FIFO"):
        check_junit_path(fifo)
    with pytest.raises(UsageError, match="is a device"):
        check_junit_path(link)
    with pytest.raises(UsageError, match="is a FIFO"):  # also at write time: it may have become one since
        write_junit(fifo, b"<testsuites/>")
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and os.readlink(link) == os.devnull
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "null"]


def test_out_refuses_a_fifo_where_a_file_goes(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "report.json")
    with pytest.raises(UsageError, match=r"report\.json there is a FIFO"):
        OutputDir(tmp_path, NAMES)
    assert stat.S_ISFIFO((tmp_path / "report.json").lstat().st_mode)


# 2. never over what the run reads


@pytest.mark.parametrize(
    ("setup", "args", "says"),
    [
        ({"b.json": None}, ["--baseline", "b.json", "--junit", "b.json"], "would overwrite --baseline"),
        (
            {"b.json": None},
            ["--baseline", "b.json", "--junit", "sub/../b.json"],
            "would overwrite --baseline",
        ),
        (
            {"b.json": None, "h.json": "b.json"},
            ["--baseline", "b.json", "--junit", "h.json"],
            "would overwrite --baseline",
        ),
        (
            {"b.json": None, "s.json": "->b.json"},
            ["--baseline", "b.json", "--junit", "s.json"],
            "would overwrite --baseline",
        ),
        ({}, ["--max-kappa", "1e9", "--junit", "pyproject.toml"], "would overwrite the config"),
        (
            {"c.toml": "[tool.condcli.check]\nmax_kappa = 1e9\n"},
            ["--config", "c.toml", "--junit", "c.toml"],
            "would overwrite --config",
        ),
        (
            {"t.txt": "a b\n"},
            ["--max-kappa", "1e9", "--text", "t.txt", "--junit", "t.txt"],
            "would overwrite --text",
        ),
        (
            {"w.pt": "x"},
            ["--max-kappa", "1e9", "--checkpoint", "w.pt", "--junit", "w.pt"],
            "would overwrite --checkpoint",
        ),
        (
            {"a.toml": "x"},
            ["--max-kappa", "1e9", "--adapter", "a.toml", "--junit", "a.toml"],
            "would overwrite --adapter",
        ),
        (
            {"im/a.png": "x"},
            ["--max-kappa", "1e9", "--images", "im", "--junit", "im/j.xml"],
            "inside --images",
        ),
        (
            {"m/config.json": "{}"},
            ["m", "--max-kappa", "1e9", "--junit", "m/config.json"],
            "would overwrite MODEL",
        ),
    ],
    ids=[
        "same",
        "relative",
        "hard-link",
        "symlink",
        "pyproject",
        "config",
        "text",
        "checkpoint",
        "adapter",
        "images",
        "model",
    ],
)
def test_junit_never_overwrites_an_input(
    setup: dict[str, str | None],
    args: list[str],
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    baseline: bytes,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, content in setup.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.write_bytes(baseline)
        elif content.startswith("->"):
            path.symlink_to(content[2:])
        elif content.endswith(".json") and (tmp_path / content).exists():
            os.link(tmp_path / content, path)
        else:
            path.write_text(content)
    before = listing(tmp_path)
    assert main(["check", *args, *FAST]) == 2
    assert says in one_error_line(capsys)
    assert listing(tmp_path) == before


def test_out_never_overwrites_an_input_nor_writes_inside_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.json").write_text("my text\n")
    (tmp_path / "im").mkdir()
    before = listing(tmp_path)
    assert main(["spectrum", *FAST, "--text", "report.json", "--out", "."]) == 2
    assert "writing report.json there would overwrite --text" in one_error_line(capsys)
    assert main(["spectrum", *FAST, "--images", "im", "--out", "im/run"]) == 2
    assert "lies inside --images" in one_error_line(capsys)
    assert main(["sweep-lambda", *FAST, "--images", "im", "--out", "im"]) == 2
    assert "lies inside --images" in one_error_line(capsys)
    samples = ROOT / "condcli" / "sample_checkpoints"
    assert main(["rank-decay", "vit-plain", *FAST, "--out", str(samples / "vit-plain")]) == 2
    assert "lies inside MODEL" in one_error_line(capsys)
    assert listing(tmp_path) == before


# 16, 7. checked before any work: dangling symlinks, loops, /sys, names too long, empty values


@pytest.mark.parametrize(
    ("make", "out", "says"),
    [
        (lambda t: (t / "d").symlink_to(t / "nowhere"), "d", "which does not exist"),
        (lambda t: (t / "d").symlink_to(t / "nowhere"), "d/sub", "which does not exist"),
        (lambda t: (t / "loop").symlink_to(t / "loop"), "loop", "symlink loop"),
        (lambda t: (t / "loop").symlink_to(t / "loop"), "loop/sub", "symlink loop"),
        (lambda t: None, "/sys/condcli-out", "cannot write in /sys"),
        (lambda t: None, "/proc/condcli-out", "cannot write in /proc"),
        (lambda t: None, "x" * 256, "more than the 255"),
        (lambda t: None, "ok/" + "x" * 300 + "/ok", "more than the 255"),
        (lambda t: (t / "f").write_text("x"), "f", "is a file, not a folder"),
        (lambda t: os.mkfifo(t / "f"), "f/sub", "is a FIFO, not a folder"),
    ],
    ids=[
        "dangling",
        "below-dangling",
        "loop",
        "below-loop",
        "sys",
        "proc",
        "name-max",
        "name-max-inner",
        "file",
        "below-fifo",
    ],
)
def test_a_bad_out_is_refused_when_made_and_creates_nothing(
    make: object, out: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    make(tmp_path)  # type: ignore[operator]
    before = listing(tmp_path)
    with pytest.raises(UsageError, match=says):
        OutputDir(Path(out), NAMES)
    assert listing(tmp_path) == before


@pytest.mark.parametrize("flag", ["--out", "--junit"])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(
    flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    command = ["check", "--max-kappa", "1e9"] if flag == "--junit" else ["spectrum"]
    assert main([*command, *FAST, flag, ""]) == 2
    assert f"'{flag}': it is empty" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_junit_name_too_long_and_dangling_link_are_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="more than the 255"):
        check_junit_path(tmp_path / ("j" * 256 + ".xml"))
    (tmp_path / "j.xml").symlink_to(tmp_path / "gone" / "j.xml")
    with pytest.raises(UsageError, match="which does not exist"):
        check_junit_path(tmp_path / "j.xml")
    with pytest.raises(UsageError, match="cannot write in /proc"):
        check_junit_path(Path("/proc/condcli-j.xml"))
    assert [p.name for p in tmp_path.iterdir()] == ["j.xml"]


# 11. the swap is all or nothing


def _old_run(out: Path) -> dict[str, tuple[int, bytes]]:
    """--out as a previous condcli run left it: three files and their manifest."""
    out.mkdir()
    OutputDir(out, NAMES).write(writer({n: f"old {n}".encode() for n in NAMES}))
    (out / "mine.txt").write_text("the user's")
    return listing(out)


def _count_replaces(out: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    calls = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append(a), real(a, b))[1])
    OutputDir(out, NAMES).write(writer({"report.json": b"new", "spectrum.png": b"new"}))
    monkeypatch.setattr(os, "replace", real)
    return len(calls)


@pytest.mark.parametrize("link", [True, False], ids=["hard-link-backup", "copy-backup"])
def test_a_failure_on_any_rename_leaves_every_old_file_as_it_was(
    link: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _old_run(tmp_path / "probe")
    total = _count_replaces(tmp_path / "probe", monkeypatch)
    assert total >= 4  # report.json, spectrum.png, the manifest, and layers.png moved out as stale
    if not link:
        monkeypatch.setattr(os, "link", lambda *a, **k: (_ for _ in ()).throw(OSError(1, "no links here")))
    for failing in range(1, total + 1):
        out = tmp_path / f"out{failing}"
        before = _old_run(out)
        calls: list[str] = []
        real = os.replace

        def replace(src: str, dst: str, failing: int = failing, calls: list[str] = calls) -> None:
            calls.append(src)
            if len(calls) == failing:
                raise OSError(28, "No space left on device")
            os.rename(src, dst)  # os.replace's own behaviour on Linux

        monkeypatch.setattr(os, "replace", replace)
        with pytest.raises(UsageError, match="writing failed"):
            OutputDir(out, NAMES).write(writer({"report.json": b"new", "spectrum.png": b"new"}))
        monkeypatch.setattr(os, "replace", real)
        assert listing(out) == before, f"failure at rename {failing}"


def test_an_interrupt_during_the_swap_puts_the_old_files_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    before = _old_run(out)
    real = os.replace
    calls = []

    def replace(src: str, dst: str) -> None:
        calls.append(src)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        OutputDir(out, NAMES).write(writer({"report.json": b"new", "spectrum.png": b"new"}))
    monkeypatch.setattr(os, "replace", real)
    assert listing(out) == before


def test_a_failed_write_removes_the_out_folder_it_made(tmp_path: Path) -> None:
    def broken(folder: Path) -> list[Path]:
        (folder / "report.json").write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(UsageError, match="writing failed"):
        OutputDir(tmp_path / "a" / "b", NAMES).write(broken)
    assert list(tmp_path.iterdir()) == []


def test_a_fifo_appearing_after_the_check_is_left_and_the_old_files_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _old_run(out)
    target = OutputDir(out, NAMES)
    (out / "spectrum.png").unlink()
    os.mkfifo(out / "spectrum.png")  # between the check and the write
    before = listing(out)
    with pytest.raises(UsageError, match=r"spectrum\.png there is a FIFO"):
        target.write(writer({"report.json": b"new", "spectrum.png": b"new"}))
    assert listing(out) == before
