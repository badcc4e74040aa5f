"""One writer of report files (issue 40): for every command, ``report.save()`` writes the files ``--out``
writes, byte for byte, and ``report.plot()`` draws the figures ``--out`` saves. Before, ``spectrum --out``
wrote embedding_table.png that ``save()`` and ``plot()`` left out, and ``weights --out`` wrote a page
without the glossary that ``save()`` gave."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import condcli
from condcli.cli.output import MANIFEST
from tests import loading_folders as lf
from tests.tiny_llm import tiny_llama

FAST = ("--max-samples", "2", "--batch-size", "2")


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny Llama (it has an embedding table: a third spectrum plot) and two tiny GPT-2 checkpoints."""
    root = tmp_path_factory.mktemp("writer")
    tiny_llama(root / "llama")
    for step in (1, 2):
        lf.hf_folder(root / "run" / f"checkpoint-{step}")
    return {"llama": root / "llama", "run": root / "run"}


RUNS: dict[str, Callable[[dict[str, Path]], list[str]]] = {
    "spectrum": lambda m: ["spectrum", str(m["llama"]), *FAST, "--layers", "0"],
    "sweep-lambda": lambda m: ["sweep-lambda", "vit-plain", *FAST, "--steps", "3", "--layers", "0"],
    "rank-decay": lambda m: ["rank-decay", "vit-plain", *FAST, "--layers", "0"],
    "track": lambda m: ["track", str(m["run"]), "--max-samples", "2"],
    "weights": lambda m: ["weights", str(m["llama"])],
    "check": lambda m: ["check", "vit-plain", *FAST, "--max-kappa", "1e9"],
    "compare": lambda m: ["compare", "vit-plain", "vit-conditioned", *FAST, "--layers", "none"],
}
PLOTS = {  # what each command draws for the runs above
    "spectrum": {"spectrum", "layers", "embedding_table"},
    "sweep-lambda": {"sweep"},
    "rank-decay": {"rank_decay", "rank_heatmap"},
    "track": {"track"},
    "weights": {"embedding_table"},
    "check": set(),
    "compare": set(),
}


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("command", sorted(RUNS))
def test_save_writes_what_out_writes_byte_for_byte(
    command: str, models: dict[str, Path], tmp_path: Path, cli: Callable[..., Result]
) -> None:
    out = tmp_path / "out"
    result = cli(*RUNS[command](models), "--out", str(out))
    assert result.exit_code == 0, result.output
    written = files(out)
    stems = {Path(name).stem for name in written if name.endswith(".png")}
    assert stems == PLOTS[command]  # the run draws every figure its command has

    report = condcli.read_report(out / "report.json")
    saved = report.save(tmp_path / "saved")
    assert sorted(p.name for p in saved) == sorted(n for n in written if n != MANIFEST)
    assert files(tmp_path / "saved") == written  # the manifest too: the same hashes
    assert set(report.plot()) == stems


def test_save_from_the_fresh_report_and_from_its_json_agree(models: dict[str, Path], tmp_path: Path) -> None:
    """The API's own report (not read back) writes the same files as the one read back from its JSON."""
    report = condcli.spectrum(str(models["llama"]), max_samples=2, batch_size=2, layers=[0])
    report.save(tmp_path / "fresh")
    condcli.read_report(tmp_path / "fresh" / "report.json").save(tmp_path / "read")
    assert files(tmp_path / "fresh") == files(tmp_path / "read")
    assert set(report.plot()) == {"spectrum", "layers", "embedding_table"}
