"""The analysis stage: runs capture on streamed batches, feeds :mod:`condcli.spectra`, builds reports.

Nothing here prints, plots or parses command lines; :mod:`condcli.cli` does that with what it returns.
"""

import condcli.writing  # noqa: F401  (registers the writer of report files that every report's save() calls)
