"""How a whole ``condcli`` process ends (condcli/cli/main.py ``finish``): as the interpreter's shutdown would
end it, less its teardown of every imported module. The exit code is the run's, stdout and stderr are
complete, a non-daemon thread's work is waited for, and the exit handlers (temporary folders' finalizers)
run; an object whose only cleanup is the teardown's garbage collection is not cleaned up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

END = """
import sys, threading, time, weakref
from pathlib import Path
from condcli.cli.main import finish

marks = Path(sys.argv[1])

class Folder:
    pass

kept = Folder()
weakref.finalize(kept, (marks / "finalized").write_text, "yes")  # as big_model's offload folders

def late() -> None:
    time.sleep(0.3)
    (marks / "thread").write_text("done")

threading.Thread(target=late, daemon=False).start()

class Teardown:
    def __del__(self) -> None:  # reached only by the interpreter's own teardown
        (marks / "teardown").write_text("ran")

left = Teardown()
sys.stdout.write("x" * 100_000)  # more than a pipe holds: flushed, never cut
sys.stderr.write("said")
finish(5)
"""


def test_a_finished_run_ends_with_its_code_its_output_and_its_exit_handlers(tmp_path: Path) -> None:
    got = subprocess.run(
        [sys.executable, "-c", END, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert (got.returncode, len(got.stdout), got.stderr) == (5, 100_000, "said")
    assert (tmp_path / "finalized").read_text() == "yes"
    assert (tmp_path / "thread").read_text() == "done"
    assert not (tmp_path / "teardown").exists()


def test_a_whole_command_writes_its_report_and_exits_zero(tmp_path: Path) -> None:
    """The console script's path end to end: the JSON report whole on stdout, --out's files in place."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "condcli", "spectrum", "--max-samples", "2", "--no-conditioned", "--json"]
    got = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    report = json.loads(got.stdout)
    assert report["inputs"]["count"] == 2
    assert json.loads((out / "report.json").read_text()) == report
    assert not [p.name for p in tmp_path.iterdir() if p.name != "out"]  # no staging folder left behind
