"""Writing a report's files: an output folder written whole or not at all (:mod:`.folder`) and the one
writer of every command's files (:mod:`.report_files`), shared by the CLI (``--out``, ``--csv``) and the
Python API (``report.save()``, ``report.write_csv()``, ``report.plot()``). Below both; above the readers of
reports (:mod:`condcli.plots`, :mod:`condcli.html`) it draws with."""

from condcli.reports.views import use_writer
from condcli.writing import report_files

use_writer(report_files)  # reports' save(), write_csv(), plot() and html() call the one writer
