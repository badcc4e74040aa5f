"""examples/notebook.ipynb runs headless (nbclient): no cell raises, and every code cell shows something."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"


def test_the_example_notebook_runs_and_every_cell_shows_output(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # a cell that raises fails here (CellExecutionError)
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs, f"cell {i} shows nothing: {cell.source[:60]!r}"
            assert not any(o.output_type == "error" for o in cell.outputs), i
