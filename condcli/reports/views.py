"""What every report offers in Python: its JSON as a dict, tidy tables, files, figures and an inline page.

:class:`ReportViews` is a base class of each command's report (spectrum, sweep-lambda, rank-decay, track,
check, compare, weights); :class:`SavedReport` gives the same methods to a report.json read back. The tables
are :mod:`condcli.reports.frames`' (this layer). The page, the plots and the files are drawn by the one
writer of report files, :mod:`condcli.writing.report_files`, a layer above this one, which this layer never
imports: the writer hands itself to :func:`use_writer` when :mod:`condcli.writing` is imported, and
:mod:`condcli.analysis` (which builds every report) and :mod:`condcli.api` (which reads one back) import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from condcli.reports import frames


class Writer(Protocol):
    """What :mod:`condcli.writing.report_files` offers this layer (registered by :func:`use_writer`)."""

    def save(self, data: Mapping[str, Any], folder: str | Path, fmt: str = "png") -> list[Path]: ...
    def save_csv(self, data: Mapping[str, Any], folder: str | Path) -> list[Path]: ...
    def figures(
        self, data: Mapping[str, Any], title: bool = True, style: str = "default"
    ) -> dict[str, Any]: ...
    def page(self, data: Mapping[str, Any]) -> str: ...
    def inline(self, data: Mapping[str, Any]) -> str: ...


_writer: list[Writer] = []  # the one writer, once condcli.writing is imported


def use_writer(writer: Writer) -> None:
    """Called once by :mod:`condcli.writing` (above this layer): the writer ``save()``, ``write_csv()``,
    ``plot()``, ``html()`` and ``_repr_html_()`` call."""
    _writer[:] = [writer]


def _views() -> Writer:
    if not _writer:
        from condcli.errors import InternalError

        raise InternalError(
            "no report writer is registered: import condcli.writing (condcli.api and condcli.analysis do)"
        )
    return _writer[0]


class ReportViews:
    """``to_dict``, ``to_pandas``, ``tables``, ``save``, ``plot`` and ``_repr_html_`` over ``to_json()``."""

    def to_json(self) -> dict[str, Any]:  # pragma: no cover - every report defines its own
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The report as ``--json`` prints it (a new dict each call)."""
        return self.to_json()

    def tables(self, statistic: str = "median") -> dict[str, frames.Table]:
        """The tidy tables (:mod:`condcli.reports.frames`) without pandas."""
        return frames.report_tables(self.to_json(), statistic)

    def to_pandas(self, statistic: str = "median") -> dict[str, Any]:
        """Table name → long-format DataFrame (``samples``, ``layers``, ``heads``, ``spectrum``, … as the
        report has them); ``statistic`` over samples: median, mean, min or max. Needs ``condcli[pandas]``."""
        if statistic not in frames.STATISTICS:
            from condcli.errors import UsageError

            raise UsageError(f"`statistic={statistic}` is not known", "use median, mean, min or max")
        return frames.to_pandas(self.to_json(), statistic)

    def save(self, folder: str | Path, fmt: str = "png") -> list[Path]:
        """Write report.json, report.html and the plots into ``folder``: the files ``--out`` writes."""
        return list(_views().save(self.to_json(), folder, fmt))

    def write_csv(self, folder: str | Path) -> list[Path]:
        """Write every table as CSV into ``folder``: the files ``--csv`` writes."""
        return list(_views().save_csv(self.to_json(), folder))

    def plot(self) -> dict[str, Any]:
        """The report's matplotlib figures by name (spectrum, layers, sweep, rank_decay, …): the plots
        ``--out`` writes."""
        return dict(_views().figures(self.to_json()))

    def html(self) -> str:
        """The self-contained HTML page (as report.html)."""
        return str(_views().page(self.to_json()))

    def _repr_html_(self) -> str:
        return str(_views().inline(self.to_json()))


class SavedReport(ReportViews):
    """A report read back from its JSON (a dict, or report.json's path)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = dict(data)

    @classmethod
    def read(cls, path: str | Path) -> SavedReport:
        from condcli.errors import InputError
        from condcli.parsing import parse_json

        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(
                f"`report={path}` cannot be read ({e})", "give a report.json condcli wrote"
            ) from None
        data = parse_json(text, str(path), "")
        if not isinstance(data, dict) or "command" not in data:
            raise InputError(f"`report={path}` is not a condcli report", "give a report.json condcli wrote")
        return cls(data)

    @property
    def command(self) -> str:
        return str(self.data.get("command"))

    def to_json(self) -> dict[str, Any]:
        copied: dict[str, Any] = json.loads(json.dumps(self.data))
        return copied

    def __repr__(self) -> str:
        model = self.data.get("model") or {}
        return f"SavedReport({self.command}, model={model.get('spec')!r})"
