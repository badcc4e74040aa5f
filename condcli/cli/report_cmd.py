"""``condcli report FILE.json [-o FILE.html]``: a saved report of any command → one self-contained HTML page.

The page goes beside the report by default, its name with ``.html`` for ``.json`` (``report.json`` →
``report.html``, ``baseline`` → ``baseline.html``). Bad input is one line and exit 2, and leaves no page
behind: the output path is checked before the report is read (never the report itself, a folder, a FIFO or
a device), the report is read and rendered whole in memory, and the page is written to a temporary file
that is moved into place only when it is complete.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from condcli.cli.help_format import OUTPUT
from condcli.cli.main import command
from condcli.cli.output import path_option

# ruff: noqa: UP045  (typer reads Optional[...] at run time on Python 3.10)

ReportFile = Annotated[
    Path,
    typer.Argument(
        metavar="FILE.json",
        help="A report condcli wrote: --out's report.json, or the --json output of any command saved to a "
        "file (any version of the JSON report).",
        show_default=False,
        parser=path_option,
    ),
]
Output = Annotated[
    Optional[Path],
    typer.Option(
        "-o",
        "--output",
        help="Write the page here. Default: beside FILE.json, with .html for .json (report.json → "
        "report.html).",
        show_default=False,
        parser=path_option,
        metavar="FILE.html",
        rich_help_panel=OUTPUT,
    ),
]
HINT = "give a report condcli wrote: condcli spectrum --json > report.json, or --out DIR's report.json"


def default_output(report: Path) -> Path:
    """Where the page goes without -o: beside ``report``, its ``.json`` replaced by (else followed by)
    ``.html``."""
    name = report.name[: -len(".json")] if report.name.lower().endswith(".json") else report.name
    return report.with_name(name + ".html")


def load_report(path: Path, rendered: tuple[str, ...]) -> dict[str, Any]:
    """The report in ``path``, checked to be a condcli report of one of the ``rendered`` commands; every
    problem is one :class:`InputError` that names the file."""
    from condcli.errors import InputError
    from condcli.outpaths import kind, shown
    from condcli.parsing import read_json
    from condcli.reports.schema import SCHEMA_VERSION

    what = f"FILE {shown(path)}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{what} does not exist", HINT) from None
    except (OSError, ValueError) as e:  # a loop, a name too long, a path through a file
        raise InputError(f"{what} cannot be read ({getattr(e, 'strerror', None) or e})", HINT) from None
    if not stat.S_ISREG(mode):  # never read a FIFO (it blocks) or a device (/dev/zero never ends)
        raise InputError(f"{what} is {kind(mode)}, not a file", HINT)
    data = read_json(path, what, HINT)
    if not isinstance(data, dict):
        raise InputError(f"{what} is not a condcli report (not a JSON object)", HINT)
    tool = data.get("tool")
    if not isinstance(tool, dict) or tool.get("name") != "condcli" or "schema_version" not in data:
        raise InputError(f'{what} is not a condcli report (no tool.name "condcli" and schema_version)', HINT)
    version = data["schema_version"]
    if type(version) is not int or version < 1:
        raise InputError(f"{what}: schema_version {shown(repr(version))} is not a report version", HINT)
    if version > SCHEMA_VERSION:
        made = tool.get("version")
        raise InputError(
            f"{what} has schema_version {version}, newer than the {SCHEMA_VERSION} this condcli reads",
            f"render it with the condcli that wrote it{f' ({shown(str(made))})' if made else ''}",
        )
    name = data.get("command")
    if name not in rendered:
        shown_name = shown(repr(name)) if isinstance(name, str) else "no command"
        raise InputError(
            f"{what} is a report of {shown_name}, which has no page",
            f"give a report of {', '.join(rendered)}",
        )
    return data


def render_page(data: dict[str, Any], path: Path) -> str:
    """The page of ``data``; a report whose parts are not what its command writes is one InputError."""
    from condcli.errors import InputError
    from condcli.html import render_html
    from condcli.outpaths import shown

    try:
        return render_html(data)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as e:
        detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise InputError(
            f"FILE {shown(path)} is not a whole {data['command']} report ({shown(detail)[:200]})", HINT
        ) from e


@command("report")
def report_command(file: ReportFile, output: Output = None) -> None:
    """Render a saved JSON report of any command as one self-contained HTML page (opens offline)."""
    from condcli.html import SECTIONS
    from condcli.outpaths import check_file_target, shown, write_file

    target = output if output is not None else default_output(file)
    what = f"-o {shown(target)}" if output is not None else f"the page {shown(target)}"
    check_file_target(target, what, [("FILE", file)])  # before reading anything
    page = render_page(load_report(file, tuple(SECTIONS)), file)
    write_file(target, page.encode("utf-8"), what)
    print(f"wrote {target}", file=sys.stderr)
