"""A report's JSON as tidy tables: one row per observation, one column per variable (``report.to_pandas()``,
``--csv DIR``).

Built from the JSON alone (``to_json()``, or a saved report.json), so a saved report gives the same tables
as a fresh one. Metric columns are the registry's keys (:mod:`condcli.reports.metrics`) followed by any
other statistic the JSON holds, so a metric added to the registry appears here without a change. A value is
the statistic over samples (``statistic``, default median); ``<key>_floor`` is true where that statistic is
only a floor, and the below-precision counts and per-sample flags are their own columns.

Tables (those the report has):

- ``samples``: per sample, every per-sample quantity of X (κ(X), κ(X + λ·I_k), κ(X + C), σ_1, σ_k, …) with
  its ``_floor`` flag and ``below_precision``.
- ``layers``: per layer and forward (plain, conditioned): the weights' κ, every per-layer metric, its floor
  flag and the below-precision counts.
- ``layer_samples``: per layer, forward, metric and sample: the value and whether it is only a floor.
- ``heads``: per layer and head: κ of the head's W slices and, with per-head detail, every per-head metric.
- ``spectrum``: per forward and index i: σ_i of X (median, p10, p90 over samples; the report keeps the
  band, not each sample's spectrum).
- ``sweep``, ``sweep_layers``: sweep-lambda's curve per λ, and each followed layer's κ per λ.
- ``rank_decay``, ``rank_decay_curves``, ``rank_decay_heads``: rank-decay's summary per layer, its
  cumulative spectra per m, and per head.
- ``checks`` (check), ``metrics`` (compare), ``weights`` (a weights report's rows).

A track report gives the same tables with a ``step`` column first, one block per checkpoint.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from condcli.commands import COMMANDS
from condcli.numbers import to_float
from condcli.reports.metrics import EMBEDDING, FLAGS, FORWARD, HEAD

STATISTICS = ("median", "mean", "min", "max")
PANDAS_EXTRA = "pandas is not installed: pip install 'condcli[pandas]' for `to_pandas()`"


@dataclass
class Table:
    """Rows of one table, with its columns in order (a column first seen in a later row is appended)."""

    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: Mapping[str, Any]) -> None:
        for key in row:
            if key not in self.columns:
                self.columns.append(key)
        self.rows.append(dict(row))

    def extend(self, other: Table, first: Mapping[str, Any]) -> None:
        """``other``'s rows, each with ``first`` (e.g. a track's step) in front."""
        for row in other.rows:
            self.add({**first, **row})
        for key in [*first, *other.columns]:
            if key not in self.columns:
                self.columns.append(key)

    def csv_text(self) -> str:
        """The table as CSV: floats in full precision (repr), inf as ``inf``, null as an empty field."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in self.columns])
        return out.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _number(value: Any) -> float | None:
    return to_float(value)


def _is_aggregate(value: Any) -> bool:
    return isinstance(value, Mapping) and "median" in value and "per_sample" in value


def _keys(node: Mapping[str, Any], registry: Iterable[str]) -> list[str]:
    """The aggregate keys of ``node``: the registry's first (present or not), then any other the JSON has."""
    ordered = list(dict.fromkeys(registry))
    return ordered + [k for k, v in node.items() if k not in ordered and _is_aggregate(v)]


def _stat(agg: Any, statistic: str) -> tuple[float | None, bool | None]:
    """(the statistic, whether it is only a floor; None where the metric carries no floor flags)."""
    if not isinstance(agg, Mapping):
        return None, None
    floor = agg.get("floor")
    return _number(agg.get(statistic)), (bool(floor.get(statistic)) if isinstance(floor, Mapping) else None)


def _metric_columns(
    row: dict[str, Any], node: Mapping[str, Any], keys: Sequence[str], statistic: str
) -> None:
    for key in keys:
        value, floor = _stat(node.get(key), statistic)
        row[key] = value
        if floor is not None or (isinstance(node.get(key), Mapping) and "floor" in node[key]):
            row[f"{key}_floor"] = floor


def samples_table(report: Mapping[str, Any]) -> Table:
    """Per sample: every per-sample quantity of X, its floor flag, and whether X is below precision."""
    table = Table()
    emb = report.get("embedding")
    if not isinstance(emb, Mapping):
        return table
    keys = [k for k in _keys(emb, (m.key for m in EMBEDDING)) if _is_aggregate(emb.get(k))]
    count = max((len(emb[k]["per_sample"]) for k in keys), default=0)
    below = set(emb.get("below_precision_samples") or ())
    for i in range(count):
        row: dict[str, Any] = {"sample": i}
        for key in keys:
            agg = emb[key]
            values = agg.get("per_sample") or []
            row[key] = _number(values[i]) if i < len(values) else None
            floors = agg.get("per_sample_floor")
            if isinstance(floors, list):
                row[f"{key}_floor"] = bool(floors[i]) if i < len(floors) else None
        row["below_precision"] = i in below
        table.add(row)
    return table


def _forwards(layer: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found = [("plain", layer)]
    if isinstance(layer.get("conditioned"), Mapping):
        found.append(("conditioned", layer["conditioned"]))
    return found


SKIP_LAYER = {"conditioned", "heads_detail", "below_precision", "repeated_rows"}


def layers_table(report: Mapping[str, Any], statistic: str = "median") -> Table:
    """Per layer and forward: the layer's own fields, every per-layer metric (``statistic`` over samples)
    with its floor flag, and the below-precision counts (``below_precision_<flag>``)."""
    table = Table()
    for layer in report.get("layers") or ():
        scalars = {
            k: v for k, v in layer.items() if k not in SKIP_LAYER and not isinstance(v, (Mapping, list))
        }
        if report.get("command") == "weights":  # weights alone: no forward, no per-layer metric
            table.add(
                {
                    k: _number(v) if k.startswith(("kappa_w", "weight_factor")) else v
                    for k, v in scalars.items()
                }
            )
            continue
        for forward, node in _forwards(layer):
            row: dict[str, Any] = {"index": layer.get("index"), "name": layer.get("name"), "forward": forward}
            row.update({k: _number(v) if k.startswith("kappa_w") else v for k, v in scalars.items()})
            _metric_columns(row, node, _keys(node, (m.key for m in FORWARD)), statistic)
            below = node.get("below_precision")
            flags = list(dict.fromkeys([*FLAGS, *(below or {})]))
            for flag in flags:
                row[f"below_precision_{flag}"] = below.get(flag) if isinstance(below, Mapping) else None
            repeated = node.get("repeated_rows")
            if isinstance(repeated, Mapping):
                row.update({f"repeated_rows_{k}": v for k, v in repeated.items()})
            table.add(row)
    return table


def layer_samples_table(report: Mapping[str, Any]) -> Table:
    """Per layer, forward, metric and sample: the value and whether it is only a floor."""
    table = Table()
    for layer in report.get("layers") or ():
        for forward, node in _forwards(layer):
            for key in _keys(node, (m.key for m in FORWARD)):
                agg = node.get(key)
                if agg is None or not _is_aggregate(agg):
                    continue
                floors = agg.get("per_sample_floor")
                for i, value in enumerate(agg["per_sample"]):
                    floor = bool(floors[i]) if isinstance(floors, list) and i < len(floors) else None
                    table.add(
                        {
                            "index": layer.get("index"),
                            "name": layer.get("name"),
                            "forward": forward,
                            "metric": key,
                            "sample": i,
                            "value": _number(value),
                            "floor": floor,
                        }
                    )
    return table


def heads_table(report: Mapping[str, Any], statistic: str = "median") -> Table:
    """Per layer and head: κ of the head's W_Q, W_K, W_V slices, H(P), and every per-head metric."""
    table = Table()
    for layer in report.get("layers") or ():
        detail = {h.get("head"): h for h in layer.get("heads_detail") or ()}
        count = max(
            [int(layer.get("heads") or 0), len(detail)]
            + [len(layer.get(k) or ()) for k in ("kappa_wq_heads", "kappa_wk_heads", "kappa_wv_heads")]
        )
        for h in range(count):
            row: dict[str, Any] = {"index": layer.get("index"), "name": layer.get("name"), "head": h}
            for w in ("q", "k", "v"):
                values = layer.get(f"kappa_w{w}_heads") or []
                row[f"kappa_w{w}"] = _number(values[h]) if h < len(values) else None
            if h in detail:
                node = detail[h]
                _metric_columns(row, node, _keys(node, (m.key for m in HEAD if m.key in node)), statistic)
            else:
                entropy = layer.get("attention_entropy_heads") or []
                if h < len(entropy):
                    row["attention_entropy"] = _number(entropy[h])
            table.add(row)
    return table


def spectrum_table(report: Mapping[str, Any]) -> Table:
    """σ_i of X per index (median, p10, p90 over samples), plain and conditioned."""
    table = Table()
    emb = report.get("embedding") or {}
    for forward, key in (("plain", "spectrum"), ("conditioned", "spectrum_conditioned")):
        band = emb.get(key)
        if not isinstance(band, Mapping):
            continue
        for i, median in enumerate(band.get("median") or ()):
            row = {"forward": forward, "i": i + 1, "sigma_median": _number(median)}
            for q in ("p10", "p90"):
                values = band.get(q) or []
                row[f"sigma_{q}"] = _number(values[i]) if i < len(values) else None
            table.add(row)
    return table


def sweep_tables(report: Mapping[str, Any]) -> dict[str, Table]:
    sweep = report.get("sweep")
    if not isinstance(sweep, Mapping):
        return {}
    curve, followed = Table(), Table()
    kappa = sweep.get("kappa") or {}
    for j, lam in enumerate(sweep.get("lambdas") or ()):
        row: dict[str, Any] = {"lambda": _number(lam)}
        for stat, values in kappa.items():
            row[f"kappa_{stat}"] = _at(values, j)
        for key in ("weyl_bound", "supplement_estimate"):
            row[key] = _at(sweep.get(key), j)
        row["recommended"] = _number(lam) == _number(sweep.get("recommended_lambda"))
        curve.add(row)
        for layer in sweep.get("layers") or ():
            followed.add(
                {
                    "index": layer.get("index"),
                    "name": layer.get("name"),
                    "lambda": _number(lam),
                    "kappa_median": _at(layer.get("kappa_median"), j),
                    "below_precision": _at(layer.get("below_precision"), j),
                    "kappa_plain_median": _number(layer.get("kappa_plain_median")),
                }
            )
    tables = {"sweep": curve}
    if followed.rows:
        tables["sweep_layers"] = followed
    return tables


def _at(values: Any, j: int) -> Any:
    if not isinstance(values, list) or j >= len(values):
        return None
    value = values[j]
    return value if isinstance(value, int) and not isinstance(value, bool) else _number(value)


RANK_STATS = ("at_m", "rank90", "erank")


def rank_tables(report: Mapping[str, Any], statistic: str = "median") -> dict[str, Table]:
    summary, curves, heads = Table(), Table(), Table()
    for forward, key in (("plain", "rank_decay"), ("conditioned", "rank_decay_conditioned")):
        result = report.get(key)
        if not isinstance(result, Mapping):
            continue
        for layer in result.get("layers") or ():
            first = {"index": layer.get("index"), "name": layer.get("name"), "forward": forward}
            row = {**first, **{k: layer.get(k) for k in ("heads", "n", "index_m", "samples")}}
            for stat in RANK_STATS:
                row[stat] = _number((layer.get(stat) or {}).get(statistic))
            summary.add(row)
            cumulative, sigma = layer.get("cumulative") or {}, layer.get("sigma") or {}
            for m, median in enumerate(cumulative.get("median") or ()):
                curve = {**first, "m": m + 1, "cumulative_median": _number(median)}
                curve.update({f"cumulative_{q}": _at(cumulative.get(q), m) for q in ("p10", "p90")})
                curve.update({f"sigma_{q}": _at(sigma.get(q), m) for q in ("median", "p10", "p90")})
                curves.add(curve)
            for head in layer.get("heads_detail") or ():
                one = {**first, "head": head.get("head")}
                for stat in RANK_STATS:
                    one[stat] = _number((head.get(stat) or {}).get(statistic))
                heads.add(one)
    tables = {"rank_decay": summary, "rank_decay_curves": curves}
    if heads.rows:
        tables["rank_decay_heads"] = heads
    return tables if summary.rows else {}


def _rows_table(rows: Any) -> Table:
    """A list of JSON objects as a table: nested objects flattened with ``_`` (``layer_index``)."""
    table = Table()
    for item in rows or ():
        if isinstance(item, Mapping):
            table.add(_flat(item))
    return table


def _flat(item: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in item.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat(value, name + "_"))
        elif isinstance(value, str) and value in ("inf", "-inf"):
            out[name] = _number(value)
        elif not isinstance(value, list):
            out[name] = value
    return out


def analysis_tables(report: Mapping[str, Any], statistic: str = "median") -> dict[str, Table]:
    """Every table one analysis (not a track) gives; empty tables are left out."""
    tables = {
        "samples": samples_table(report),
        "layers": layers_table(report, statistic),
        "layer_samples": layer_samples_table(report),
        "heads": heads_table(report, statistic),
        "spectrum": spectrum_table(report),
        **sweep_tables(report),
        **rank_tables(report, statistic),
    }
    if report.get("command") == "check":
        tables["checks"] = _rows_table(report.get("checks"))
    if report.get("command") == "compare":
        tables["metrics"] = _rows_table(report.get("metrics"))
    if isinstance(report.get("weights"), list):  # the weights command's rows (one per matrix)
        tables["weights"] = _rows_table(report.get("weights"))
    return {name: t for name, t in tables.items() if t.rows}


def report_tables(report: Mapping[str, Any], statistic: str = "median") -> dict[str, Table]:
    """The report's tables by name (see the module docstring); a track report's per checkpoint, with
    ``step`` first."""
    if report.get("command") != "track":
        return analysis_tables(report, statistic)
    merged: dict[str, Table] = {}
    for point in (report.get("track") or {}).get("checkpoints") or ():
        one = analysis_tables(point.get("report") or {}, statistic)
        for name, table in one.items():
            merged.setdefault(name, Table()).extend(table, {"step": point.get("step")})
    return merged


def to_pandas(report: Mapping[str, Any], statistic: str = "median") -> dict[str, Any]:
    """The report's tables as pandas DataFrames (the ``pandas`` extra)."""
    try:
        import pandas as pd
    except ImportError:
        from condcli.errors import UsageError

        raise UsageError(PANDAS_EXTRA) from None
    return {
        name: pd.DataFrame(table.rows, columns=table.columns)
        for name, table in report_tables(report, statistic).items()
    }


def csv_files(report: Mapping[str, Any]) -> dict[str, str]:
    """File name → CSV text of every table (``--csv DIR``), with the standard library alone."""
    return {f"{name}.csv": table.csv_text() for name, table in report_tables(report).items()}


CSV_NAMES = tuple(dict.fromkeys(f"{name}.csv" for c in COMMANDS for name in c.csv))  # the registry's
"""Every file `csv` may write (an output folder declares them before any work)."""


def write_csv(report: Mapping[str, Any], folder: Path) -> list[Path]:
    """Write every table of ``report`` as ``<name>.csv`` into ``folder``; returns the paths."""
    written = []
    for name, text in csv_files(report).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
