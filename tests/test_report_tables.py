"""A report's tidy tables (to_pandas, --csv), its JSON Schema (condcli schema) and its notebook views, read
against the report's own JSON as the reference."""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import condcli
from condcli.errors import UsageError
from condcli.reports import frames, metrics, schema


@pytest.fixture(scope="module")
def report() -> Any:
    return condcli.spectrum("vit-plain", heads=True, max_samples=3, batch_size=3)


def _f(value: Any) -> float:
    return math.inf if value == "inf" else float(value)


def test_layers_table_holds_the_json_medians_floors_and_counts(report: Any) -> None:
    data = report.to_json()
    layers = report.to_pandas()["layers"]
    assert len(layers) == 2 * len(data["layers"])  # plain and conditioned per layer
    for layer in data["layers"]:
        for forward, node in (("plain", layer), ("conditioned", layer["conditioned"])):
            row = layers[(layers["index"] == layer["index"]) & (layers["forward"] == forward)].iloc[0]
            for m in metrics.FORWARD:
                agg = node[m.key]
                if agg is None:
                    assert row[m.key] is None or math.isnan(row[m.key])
                    continue
                assert row[m.key] == _f(agg["median"])
                if "floor" in agg:
                    assert bool(row[f"{m.key}_floor"]) is agg["floor"]["median"]
            for flag, count in node["below_precision"].items():
                assert row[f"below_precision_{flag}"] == count or (
                    count is None and row[f"below_precision_{flag}"] is None
                )


def test_every_registry_metric_is_a_column(report: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = report.to_pandas()
    assert {m.key for m in metrics.FORWARD} <= set(tables["layers"].columns)
    assert {m.key for m in metrics.HEAD if not m.needs_rotation} <= set(tables["heads"].columns)
    assert {m.key for m in metrics.EMBEDDING} <= set(tables["samples"].columns)
    # a metric declared in the registry becomes a column without a change to the tables
    new = metrics.MetricDef("kappa_new", "κ_new", "forward", "higher", "a test metric")
    monkeypatch.setattr(frames, "FORWARD", (*metrics.FORWARD, new))
    assert "kappa_new" in frames.layers_table(report.to_json()).columns


def test_samples_heads_and_spectrum_match_the_json(report: Any) -> None:
    data, tables = report.to_json(), report.to_pandas()
    emb = data["embedding"]
    samples = tables["samples"]
    assert list(samples["kappa"]) == [_f(v) for v in emb["kappa"]["per_sample"]]
    assert list(samples["kappa_floor"]) == emb["kappa"]["per_sample_floor"]
    assert list(samples["below_precision"]) == [i in emb["below_precision_samples"] for i in range(3)]
    heads = tables["heads"]
    first = data["layers"][0]
    assert list(heads[heads["index"] == 0]["kappa_wq"]) == first["kappa_wq_heads"]
    assert list(heads[heads["index"] == 0]["mu_la"]) == [
        _f(h["mu_la"]["median"]) for h in first["heads_detail"]
    ]
    spectrum = tables["spectrum"]
    assert list(spectrum[spectrum["forward"] == "plain"]["sigma_median"]) == emb["spectrum"]["median"]


def test_a_saved_report_gives_the_same_tables_and_csv(report: Any, tmp_path: Path) -> None:
    report.save(tmp_path)
    saved = condcli.read_report(tmp_path / "report.json")
    for name, table in report.to_pandas().items():
        assert saved.to_pandas()[name].equals(table), name
    written = saved.write_csv(tmp_path / "csv")
    with open(tmp_path / "csv" / "layers.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    layers = report.to_pandas()["layers"]
    assert [float(r["kappa"]) for r in rows] == list(layers["kappa"])
    assert [r["kappa_floor"] for r in rows] == ["true" if v else "false" for v in layers["kappa_floor"]]
    assert {p.name for p in written} == {f"{n}.csv" for n in report.to_pandas()}


def test_cli_csv_writes_the_same_tables(cli: Callable[..., Result], tmp_path: Path) -> None:
    result = cli(
        "sweep-lambda", "vit-plain", "--max-samples", "2", "--lambdas", "1,10", "--csv", str(tmp_path)
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == ["samples.csv", "sweep.csv"]
    rows = list(csv.DictReader(open(tmp_path / "sweep.csv", encoding="utf-8")))
    assert [float(r["lambda"]) for r in rows] == [1.0, 10.0]


def test_without_pandas_one_line_names_the_extra(report: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UsageError) as caught:
        report.to_pandas()
    assert "condcli[pandas]" in str(caught.value) and "\n" not in str(caught.value)


def test_the_schema_refuses_a_key_it_does_not_declare(report: Any) -> None:
    data = report.to_json()
    assert schema.problems(data) == []
    for where in (data, data["embedding"], data["layers"][0], data["layers"][0]["conditioned"]):
        where["surprise"] = 1
        assert any("surprise" in p for p in schema.problems(data)), where.keys()
        del where["surprise"]
    data["schema_version"] = 2
    assert schema.problems(data)


def test_schema_metric_properties_come_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    new = metrics.MetricDef("kappa_new", "κ_new", "forward", "higher", "a test metric")
    monkeypatch.setattr(schema, "FORWARD", (*metrics.FORWARD, new))
    schema._defs.cache_clear()
    try:
        defs = schema.schema_of("spectrum")["$defs"]
        assert "kappa_new" in defs["layer"]["properties"] and "kappa_new" in defs["forward"]["properties"]
    finally:
        monkeypatch.undo()
        schema._defs.cache_clear()


def test_condcli_schema_prints_a_valid_schema_per_command(cli: Callable[..., Result]) -> None:
    import jsonschema

    for command in (None, *schema.COMMANDS):
        result = cli("schema", *([command] if command else []))
        assert result.exit_code == 0, result.output
        jsonschema.Draft202012Validator.check_schema(json.loads(result.stdout))
    assert cli("schema", "nope").exit_code == 2


def test_the_notebook_view_is_the_page_with_nothing_external(report: Any) -> None:
    import html

    shown = report._repr_html_()
    assert shown.startswith("<iframe srcdoc=") and "height: 720px" in shown
    page = html.unescape(shown.split('srcdoc="', 1)[1].split('" style=', 1)[0])
    assert page == report.html()
    assert 'src="http' not in page and "<link" not in page and "@import" not in page
    assert set(report.plot()) == {"spectrum", "layers"}
