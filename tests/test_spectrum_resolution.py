"""Zeros are zeros (issue 44, docs/math.md#spectra-below-resolution): on a tiny RoPE decoder whose prompt
repeats tokens (18 rows, 10 distinct), σ_min is 0 exactly with the repeated-rows reason, the spectrum's tail
from index 10 (the distinct rows) is exactly 0 and marked so, and no value printed or drawn (JSON, table,
PNG artists, the page's SVG) lies at or below tol. References: float64 NumPy SVD of the model's own
``hidden_states[0]`` and of its stored embedding table, and NumPy's percentiles."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from condcli.cli import app
from condcli.html import render_html
from condcli.plots.spectrum import spectrum_figure
from condcli.spectra.aggregate import aggregate
from condcli.spectra.bands import resolved_band, spectrum_band
from tests.repeated_prompt import DISTINCT, PROMPT, ROWS, repeated_prompt_llama

EPS64 = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("rope")
    prompt = repeated_prompt_llama(folder)
    args = ["spectrum", str(folder), "--text", str(prompt), "--layers", "none"]
    runner = CliRunner()
    got = runner.invoke(app, [*args, "--json"])
    assert got.exit_code == 0, got.output
    table = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    import transformers as tf

    model = tf.AutoModelForCausalLM.from_pretrained(folder)
    ids = tf.AutoTokenizer.from_pretrained(folder)(PROMPT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        x = model(input_ids=ids, output_hidden_states=True).hidden_states[0][0].double().numpy()
    table_e = model.get_input_embeddings().weight.detach().double().numpy()
    return {"report": json.loads(got.stdout), "table": table.stdout, "x": x, "e": table_e}


def _tol(x: np.ndarray) -> float:
    """tol of an exact lookup (float64's own resolution): max(u·‖X‖_F, max(N, d)·eps·σ_1)."""
    s = np.linalg.svd(x, compute_uv=False)
    return max(EPS64 / 2 * float(np.linalg.norm(x)), max(x.shape) * EPS64 * float(s[0]))


def test_sigma_min_is_zero_with_the_repeated_rows_reason(run: dict[str, Any]) -> None:
    x = run["x"]
    assert x.shape[0] == ROWS and np.unique(x, axis=0).shape[0] == DISTINCT < min(x.shape)
    sigma_min = run["report"]["embedding"]["sigma_min"]
    assert [sigma_min[q] for q in ("median", "mean", "min", "max")] == [0.0] * 4
    assert sigma_min["per_sample"] == [0.0] and sigma_min["per_sample_zero"] == [True]
    assert sigma_min["zero_count"] == 1 and sigma_min["ceiling_count"] == 0
    assert (
        f"exactly 0 in 1/1 samples: {DISTINCT} distinct of {ROWS} rows: repeated tokens"
        in sigma_min["reason"]
    )


def test_the_tail_from_the_distinct_rows_is_exactly_zero_and_marked(run: dict[str, Any]) -> None:
    x = run["x"]
    band = run["report"]["embedding"]["spectrum"]
    s = np.linalg.svd(x, compute_uv=False)
    tol = _tol(x)
    assert band["resolution"] == pytest.approx(tol, rel=1e-9)
    assert band["unresolved_from"] == band["zero_from"] == DISTINCT
    assert (
        band["zero_count"]
        == band["unresolved_count"]
        == {q: ROWS - DISTINCT for q in ("median", "p10", "p90")}
    )
    assert f"{DISTINCT} distinct of {ROWS} rows: repeated tokens" in band["unresolved_reason"]
    for q in ("median", "p10", "p90"):
        np.testing.assert_allclose(band[q][:DISTINCT], s[:DISTINCT], rtol=1e-9)
        assert band[q][DISTINCT:] == [0.0] * (ROWS - DISTINCT)
    assert (s[DISTINCT:] < tol).all()  # what the old report printed as data: rounding noise


def test_no_printed_value_lies_below_tol(run: dict[str, Any]) -> None:
    tol = _tol(run["x"])
    emb = run["report"]["embedding"]
    for key in ("sigma_max", "sigma_min"):
        assert all(v == 0 or v > tol for v in emb[key]["per_sample"])
    for key in ("spectrum", "spectrum_conditioned"):
        assert all(v == 0 or v > tol for q in ("median", "p10", "p90") for v in emb[key][q])
    row = next(line for line in run["table"].splitlines() if "σ_min" in line)
    cells = [c.strip() for c in row.split("│")[2:5]]
    assert cells == ["0", "0", "0"] and "repeated tokens" in row
    # every number printed is a measurement above tol, or a resolution itself ("σ_k < 2.7e-15" of E)
    numbers = [float(v) for v in re.findall(r"(?<!< )\b\d\.?\d*e[+-]\d+", run["table"])]
    assert numbers and all(v > tol for v in numbers), numbers


def test_the_png_draws_only_measured_values_and_marks_the_tail(run: dict[str, Any]) -> None:
    report, tol = run["report"], _tol(run["x"])
    ax = spectrum_figure(report).axes[0]
    drawn = [line for line in ax.lines if len(line.get_xdata()) > 2]
    assert len(drawn) == 2  # X and X + λ·I_k
    for line in drawn:
        y = np.asarray(line.get_ydata(), dtype=float)
        assert (y[np.isfinite(y)] > tol).all()
    x_series = next(line for line in drawn if line.get_label().startswith("σ_i(X) "))
    assert int(np.isfinite(np.asarray(x_series.get_ydata(), dtype=float)).sum()) == DISTINCT
    refs = [line for line in ax.lines if len(line.get_xdata()) == 2]
    vertical = [r for r in refs if r.get_xdata()[0] == r.get_xdata()[1]]
    horizontal = [r for r in refs if r.get_ydata()[0] == r.get_ydata()[1]]
    assert [float(r.get_xdata()[0]) for r in vertical] == [DISTINCT + 0.5]
    assert f"{ROWS - DISTINCT} exactly 0 (repeated tokens)" in vertical[0].get_label()
    assert [float(r.get_ydata()[0]) for r in horizontal] == pytest.approx([tol], rel=1e-9)
    assert ax.get_xlim()[0] == 1.0  # the index starts at 1
    labels = ax.get_legend_handles_labels()[1] + [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("p10" in t for t in labels)  # one sample: no band to see, none listed (issue 41)


def _polyline_pixels(svg: str) -> list[list[float]]:
    return [
        [float(p.split(",")[1]) for p in points.split()]
        for points in re.findall(r'<polyline class="line" points="([^"]*)"', svg)
    ]


def test_the_page_draws_only_measured_values_and_marks_the_tail(run: dict[str, Any]) -> None:
    page = render_html(run["report"])
    chart = page[page.index('id="chart-spectrum"') :]
    chart = chart[: chart.index("</svg>")]
    tol = _tol(run["x"])
    ref = re.search(
        r'<line class="ref" x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)" y2="[\d.]+"[^>]*data-value="([^"]+)"', chart
    )
    assert ref is not None and float(ref.group(2)) == pytest.approx(tol, rel=1e-9)
    lines = _polyline_pixels(chart)
    assert sorted(len(points) for points in lines) == [DISTINCT, ROWS]
    assert all(y < float(ref.group(1)) for points in lines for y in points)  # every point above the line
    assert f"{ROWS - DISTINCT} exactly 0 (repeated tokens)" in chart
    sigma_min_row = re.search(r"<tr><td>σ<sub>min</sub></td>(.*?)</tr>", page)
    assert sigma_min_row is not None and "repeated tokens" in sigma_min_row.group(1)
    assert re.findall(r'data-value="([^"]+)"', sigma_min_row.group(1)) == ["0.0"] * 3


def test_the_embedding_table_tail_is_null_below_float64_resolution(run: dict[str, Any]) -> None:
    e = run["e"]  # its padding row is zero: rank V − 1
    s = np.linalg.svd(e, compute_uv=False)
    res = max(e.shape) * EPS64 * float(s[0])
    table = run["report"]["embedding_table"]
    rank = int((s > res).sum())
    assert rank == np.linalg.matrix_rank(e) < min(e.shape)
    assert table["resolution"] == pytest.approx(res, rel=1e-9)
    assert table["unresolved_from"] == rank and table["unresolved_count"] == len(s) - rank
    np.testing.assert_allclose(table["spectrum"][:rank], s[:rank], rtol=1e-6)
    assert table["spectrum"][rank:] == [None] * (len(s) - rank)
    assert table["sigma_min_ceiling"] is True and table["sigma_min"] == pytest.approx(res, rel=1e-9)


def test_band_percentiles_treat_unresolved_entries_as_unresolved() -> None:
    """Random spectra with random zero tails (rank caps) and entries below a resolution: every number in the
    band is NumPy's percentile of the raw column, above the resolution, and taken between two measured
    samples; 0 only between two exact zeros; NaN otherwise."""
    rng = np.random.default_rng(0)
    for trial in range(40):
        n, k = int(rng.integers(1, 9)), int(rng.integers(2, 12))
        spectra = np.sort(10.0 ** rng.uniform(-20, 0, (n, k)), axis=1)[:, ::-1]
        tols = 10.0 ** rng.uniform(-12, -4, n)
        ranks = rng.integers(0, k + 1, n)
        res = float(tols.max())
        zero = np.arange(k)[None, :] >= ranks[:, None]
        spectra[zero] = res * rng.uniform(0, 1e-3, int(zero.sum()))  # what an SVD gives there: rounding
        band = spectrum_band(list(spectra), list(tols), list(ranks))
        measured = ~zero & (spectra > res)
        for q, values in zip((50, 10, 90), (band.median, band.p10, band.p90), strict=True):
            h = (n - 1) * q / 100
            lo, hi = int(np.floor(h)), int(np.ceil(h))
            for i, v in enumerate(values):
                order = np.argsort(np.where(measured[:, i], spectra[:, i], np.where(zero[:, i], -2.0, -1.0)))
                if measured[order[lo], i] and measured[order[hi], i]:
                    assert v == pytest.approx(float(np.percentile(spectra[:, i], q)), rel=1e-12) and v > res
                elif zero[order[lo], i] and zero[order[hi], i]:
                    assert v == 0.0, (trial, q, i)
                else:
                    assert np.isnan(v), (trial, q, i)


def test_a_band_without_a_resolution_is_the_plain_percentiles() -> None:
    rows = [[3.0, 2.0, 1e-30], [5.0, 4.0, 1e-20]]
    plain = resolved_band(np.array(rows))
    assert plain.median == tuple(np.percentile(np.array(rows), 50, axis=0).tolist())
    assert "resolution" not in plain.to_json()


def test_ceiling_statistics() -> None:
    """σ_min of samples below resolution is only a ceiling: each statistic that lowering them could lower."""
    a = aggregate([1e-3, 2e-15, 3e-3], ceilings=[False, True, False], zeros=[False, False, False])
    assert {s: a.is_ceiling(s) for s in ("median", "mean", "min", "max")} == {
        "median": False,
        "mean": True,
        "min": True,
        "max": False,
    }
    b = aggregate([0.0, 2e-15], ceilings=[False, True], zeros=[True, False])
    assert not b.is_ceiling("min") and b.is_ceiling("max") and b.is_ceiling("median")
    assert b.to_json()["zero_count"] == 1 and b.to_json()["ceiling"]["max"] is True


def test_a_sigma_min_below_resolution_is_less_than_tol_with_its_reason() -> None:
    """A float32 X whose second token is twice its first (rows distinct, rank k − 1): σ_k lies below
    tol = u·‖X‖_F, so σ_min is reported as tol, only a ceiling ("< tol"), and the spectrum's last entry is
    null. Reference: float64 NumPy of the X the model computed (recorded by the hook that scales the row)."""
    from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
    from condcli.cli.spectrum_table import sigma_stat
    from condcli.html.sections_spectrum import sigma_cell
    from condcli.inputs.batches import InputSpec, stream
    from condcli.loading.sources import LoadOptions, load
    from tests.recording import replay

    loaded = load("vit-plain", LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=3, batch_size=3)))
    seen: list[torch.Tensor] = []

    def double_first(m: object, a: object, o: torch.Tensor) -> torch.Tensor:
        out = torch.cat([o[:, :1], 2 * o[:, :1], o[:, 2:]], 1) if o.shape[0] else o
        seen.append(out.detach().clone())
        return out

    handle = loaded.model.pos_drop.register_forward_hook(double_first)
    try:
        report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=10.0, layers=[]), "test")
    finally:
        handle.remove()
    X = next(x for x in seen if x.shape[0]).double().numpy()
    tol = np.array([np.finfo(np.float32).eps / 2 * np.linalg.norm(x) for x in X])
    s = np.linalg.svd(X, compute_uv=False)
    assert (s[:, -1] < tol).all() and (s[:, -2] > tol).all()
    e = report.embedding
    assert e.repeated_rows_samples == () and e.below_precision_samples == (0, 1, 2)
    np.testing.assert_allclose(e.sigma_min.per_sample, tol, rtol=1e-9)
    assert e.sigma_min.per_sample_ceiling == (True,) * 3 and e.sigma_min.zero_count == 0
    assert all(e.sigma_min.is_ceiling(q) for q in ("median", "mean", "min", "max"))
    data = json.loads(json.dumps(report.to_json()))["embedding"]
    assert (
        data["sigma_min"]["reason"] == "< tol in 3/3 samples: below float32 resolution (σ_k ≤ tol = u·‖X‖_F)"
    )
    assert sigma_stat(e.sigma_min, "median").startswith("< ")
    assert sigma_cell(data["sigma_min"], "max").text.startswith("< ")
    band = data["spectrum"]
    k = s.shape[1]
    assert band["resolution"] == pytest.approx(float(tol.max()), rel=1e-9)
    assert band["unresolved_from"] == k - 1 and band["zero_from"] is None
    assert [band[q][-1] for q in ("median", "p10", "p90")] == [None] * 3
    np.testing.assert_allclose(band["median"][:-1], np.median(s, 0)[:-1], rtol=1e-6)
    assert band["unresolved_reason"] == f"1 below resolution (σ_i ≤ {float(tol.max()):.2g})"


def test_an_invisible_band_is_neither_drawn_nor_listed() -> None:
    """Issue 41: a p10–p90 band that hides under its line (X + λ·I_k of ViT-B) has no legend entry; one
    wide enough to see (X) keeps it."""
    from condcli.figures.spectrum import spectrum as described

    k = 20
    x = [10.0 ** (-i / 5) for i in range(k)]
    emb = {
        "kappa": {"median": 151.0},
        "kappa_conditioned": {"median": 2.2},
        "spectrum": {"median": x, "p10": [v / 1.3 for v in x], "p90": [v * 1.3 for v in x]},
        "spectrum_conditioned": {
            "median": [10.0] * k,
            "p10": [10.0 / 1.001] * k,
            "p90": [10.0 * 1.001] * k,
        },
    }
    panel = described({"embedding": emb, "settings": {"lambda": 10.0}}).panel(0)
    assert [e for e in panel.legend_entries() if "p10" in e] == ["σ_i(X): p10–p90"]
    assert panel.x.range == (1.0, float(k))
