"""``--csv`` never removes what this run or an ``--out`` run wrote (issue 38, item 2).

``--out D --csv D`` is one folder: the report, its page, its plots and its CSV tables under one manifest
(before, the CSV write removed the report it had just written as stale). ``--csv D`` into an earlier
``--out D`` folder replaces only that folder's CSV tables; a later ``--out D`` then replaces the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from condcli.cli.output import MANIFEST, OutputDir, Writer
from condcli.reports.frames import CSV_NAMES

RUN = ("spectrum", "vit-plain", "--max-samples", "2", "--batch-size", "2", "--no-conditioned")
REPORT = {"report.json", "report.html", "spectrum.png", "layers.png"}


def manifest(folder: Path) -> set[str]:
    return set(json.loads((folder / MANIFEST).read_text())["condcli"]["files"])


def wrote(result: Result) -> list[Path]:
    """The files the run's last stderr line says it wrote."""
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("wrote "), result.stderr
    return [Path(p) for p in line.removeprefix("wrote ").split(", ")]


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_out_and_csv_into_one_folder_is_one_coherent_folder(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "d"
    result = cli(*RUN, "--layers", "0", "--out", str(out), "--csv", str(out))
    assert result.exit_code == 0, result.output
    said = wrote(result)
    assert all(p.is_file() for p in said)  # every file it says it wrote is there
    tables = {p.name for p in said} - REPORT
    assert {p.name for p in said} >= REPORT and tables and tables <= set(CSV_NAMES)
    assert {p.name for p in out.iterdir()} == {*REPORT, *tables, MANIFEST}
    assert manifest(out) == {*REPORT, *tables}  # one manifest lists the report and the tables
    assert not [p for p in out.iterdir() if p.name.startswith(".condcli-") and p.name != MANIFEST]


def test_the_same_folder_spelled_another_way_is_the_same_folder(
    tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to("d")
    result = cli(*RUN, "--layers", "none", "--out", "d", "--csv", "./link/")
    assert result.exit_code == 0, result.output
    assert {"report.json", "report.html", "spectrum.png", "samples.csv"} <= set(contents(tmp_path / "d"))
    assert {"report.json", "samples.csv"} <= manifest(tmp_path / "d")


def test_csv_into_an_earlier_out_folder_keeps_its_report(tmp_path: Path, cli: Callable[..., Result]) -> None:
    out = tmp_path / "d"
    assert cli(*RUN, "--layers", "0", "--out", str(out)).exit_code == 0
    report = contents(out)
    del report[MANIFEST]
    result = cli(*RUN, "--layers", "none", "--csv", str(out))
    assert result.exit_code == 0, result.output
    now = contents(out)
    assert {name: now[name] for name in report} == report  # the report, page and plots as they were
    assert {"samples.csv", "spectrum.csv"} <= set(now)
    assert manifest(out) >= {*REPORT, "samples.csv"}  # still condcli's, so that a later --out replaces them

    # a later --out run replaces the whole earlier run: its report and plots, and the CSVs beside them
    assert cli(*RUN, "--layers", "none", "--out", str(out)).exit_code == 0
    assert set(contents(out)) == {"report.json", "report.html", "spectrum.png", MANIFEST}


def test_csv_still_replaces_its_own_stale_tables(tmp_path: Path, cli: Callable[..., Result]) -> None:
    out = tmp_path / "d"
    assert cli(*RUN, "--layers", "0", "--csv", str(out)).exit_code == 0
    assert (out / "layers.csv").is_file()
    (out / "notes.txt").write_text("the user's")
    assert cli(*RUN, "--layers", "none", "--csv", str(out)).exit_code == 0
    assert not (out / "layers.csv").exists()  # a table of the earlier run this one has not
    assert (out / "notes.txt").read_text() == "the user's"


def writer(files: dict[str, bytes]) -> Writer:
    def write(folder: Path) -> list[Path]:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return [folder / name for name in files]

    return write


def test_a_folder_of_its_own_names_only_its_stale_files(tmp_path: Path) -> None:
    """OutputDir(only_own=True), as --csv: the earlier manifest's other files stay, listed again."""
    OutputDir(tmp_path, ("report.json", "a.csv")).write(writer({"report.json": b"r", "a.csv": b"a"}))
    OutputDir(tmp_path, ("a.csv", "b.csv"), param="csv", only_own=True).write(writer({"b.csv": b"b"}))
    assert contents(tmp_path).keys() == {"report.json", "b.csv", MANIFEST}
    assert manifest(tmp_path) == {"report.json", "b.csv"}
