"""condcli.plots: figures drawn from synthetic report dicts, checked through the artists they hold."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D

from condcli import plots
from condcli.errors import UsageError
from condcli.figures.labels import mathtext
from condcli.figures.palette import ROLE_COLORS

LAM = 2.5
RNG_SEED = 0

PLAIN, COND = ROLE_COLORS["plain"], ROLE_COLORS["conditioned"]  # vermillion, bluish green (Okabe–Ito)


def jf(v: float) -> float | str:
    """A float as the report writes it: ±inf as a string."""
    v = float(v)
    return ("inf" if v > 0 else "-inf") if math.isinf(v) else v


def agg(values: list[float]) -> dict[str, Any]:
    """An AGG dict (docs/math.md#aggregation) from a list of per-sample values."""
    a = np.asarray(values, dtype=np.float64)
    return {
        "median": jf(np.median(a)),
        "mean": jf(np.mean(a)),
        "min": jf(np.min(a)),
        "max": jf(np.max(a)),
        "per_sample": [jf(v) for v in a],
        "inf_count": int(np.isinf(a).sum()),
    }


def band(spectra: np.ndarray) -> dict[str, list[float | str]]:
    """A BAND dict from a (samples, k) array of descending singular values."""
    return {
        q: [jf(v) for v in np.percentile(spectra, p, axis=0)]
        for q, p in (("median", 50), ("p10", 10), ("p90", 90))
    }


def envelope(command: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "tool": {"name": "condcli", "version": "0.0.test"},
        "command": command,
        "model": {
            "spec": "timm:vit_tiny_test",
            "from": "test",
            "family": "timm-vit",
            "source": "timm",
            "weights": "random",
            "num_layers": 3,
        },
        "inputs": {
            "kind": "synthetic",
            "description": "gaussian",
            "preprocessing": "none",
            "count": 5,
            "tokens": 12,
            "dim": 8,
        },
        "settings": {
            "lambda": LAM,
            "dtype": "float32",
            "device": "cpu",
            "seed": RNG_SEED,
            "conditioned_forward": True,
            "heads": False,
        },
    }


def layer(index: int, kappa: list[float], mu: list[float], conditioned: bool) -> dict[str, Any]:
    cond = None
    if conditioned:
        cond = {
            "kappa": agg([v / 10 for v in kappa]),
            "kappa_attn_input": agg([v / 20 for v in kappa]),
            "mu_la": agg([v / 100 for v in mu]),
            "mu_a": None,
            "kappa_probs": None,
        }
    return {
        "index": index,
        "name": f"blocks.{index}",
        "attention": "softmax",
        "heads": 2,
        "approximation": False,
        "kappa": agg(kappa),
        "kappa_attn_input": agg([2 * v for v in kappa]),
        "kappa_wq": 3.0,
        "kappa_wk": 4.0,
        "kappa_wv": 5.0,
        "kappa_wq_heads": [3.0, 3.1],
        "kappa_wk_heads": [4.0, 4.1],
        "kappa_wv_heads": [5.0, 5.1],
        "mu_la": agg(mu),
        "mu_a": None,
        "kappa_probs": None,
        "below_precision": {"x": 0, "attn_input": 0, "probs": None},
        "heads_detail": None,
        "conditioned": cond,
    }


def spectrum_report(num_layers: int = 3, conditioned: bool = True) -> dict[str, Any]:
    """A spectrum report computed from random 12×8 matrices and their X + λ·I_k."""
    rng = np.random.default_rng(RNG_SEED)
    xs = rng.standard_normal((5, 12, 8)) * np.geomspace(10, 0.01, 8)
    eye = np.eye(12, 8)
    s = np.linalg.svd(xs, compute_uv=False)
    sc = np.linalg.svd(xs + LAM * eye, compute_uv=False)
    kappa, kappa_c = list(s[:, 0] / s[:, -1]), list(sc[:, 0] / sc[:, -1])
    report = envelope("spectrum")
    report["embedding"] = {
        "where": "pos_drop",
        "description": "after position embedding",
        "after_position_encoding": True,
        "model_conditioning": None,
        "capture_dtype": "float32",
        "k": 8,
        "kappa": agg(kappa),
        "kappa_conditioned": agg(kappa_c),
        "kappa_corrected": agg([1.5] * 5),
        "sigma_max": agg(list(s[:, 0])),
        "sigma_min": agg(list(s[:, -1])),
        "numerical_rank": agg([8] * 5),
        "below_precision": 0,
        "below_precision_samples": [],
        "spectrum": band(s),
        "spectrum_conditioned": band(sc),
        "weyl_bound": agg([3.0] * 5),
    }
    report["layers"] = [
        layer(i, [10.0 * (i + 1) + j for j in range(5)], [1e3 * (i + 1) + j for j in range(5)], conditioned)
        for i in range(num_layers)
    ]
    report["conditioned_forward"] = {"applied": conditioned, "conditioning": "shift", "reason": None}
    report["notes"] = []
    return report


def sweep_report(with_layers: bool = True, recommended: float | None = 4.0) -> dict[str, Any]:
    lambdas = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    median = [500.0, 90.0, 12.0, 3.0, 1.8, 1.4]
    report = envelope("sweep-lambda")
    report["settings"]["target_kappa"] = 3.0
    report["embedding"] = {"where": "pos_drop", "k": 8, "kappa": agg([1e3]), "kappa_corrected": agg([1.5])}
    report["sweep"] = {
        "lambdas": lambdas,
        "kappa": {
            "median": median,
            "p10": [0.8 * v for v in median],
            "p90": [1.2 * v for v in median],
            "inf_count": [0] * 6,
        },
        "weyl_bound": ["inf", "inf", "inf", 7.0, 2.5, 1.7],
        "supplement_estimate": ["inf", "inf", 30.0, 6.0, 2.4, 1.6],
        "weyl_lambda_for_target": 6.0,
        "kappa_corrected": 1.5,
        "kappa_plain": 1000.0,
        "recommended_lambda": recommended,
        "target_kappa": 3.0,
        "layers": None,
    }
    if with_layers:
        report["sweep"]["layers"] = [
            {
                "index": i,
                "name": f"blocks.{i}",
                "kappa_median": [v * (i + 1) for v in median],
                "kappa_plain_median": 1e4,
            }
            for i in range(4)
        ]
    return report


def line(ax: Axes, label_part: str, color: str | None = None, exact: bool = False) -> Line2D:
    """The one line of ``ax`` whose label contains (or is) ``label_part`` and has ``color``, if given."""
    found = [
        ln
        for ln in ax.get_lines()
        if (label_part == ln.get_label() if exact else label_part in str(ln.get_label()))
        and (color is None or ln.get_color() == color)
    ]
    assert len(found) == 1, [ln.get_label() for ln in ax.get_lines()]
    return found[0]


def floats(values: list[Any]) -> np.ndarray:
    return np.array([float(v) for v in values])


# --- json floats -----------------------------------------------------------------------------------


def test_json_to_float_reads_report_floats() -> None:
    assert plots.json_to_float("inf") == math.inf
    assert plots.json_to_float("-inf") == -math.inf
    assert plots.json_to_float(2) == 2.0
    assert math.isnan(plots.json_to_float(None))
    np.testing.assert_array_equal(plots.json_floats([1.5, "inf"]), [1.5, math.inf])
    with pytest.raises(TypeError):
        plots.json_to_float([1.0])


# --- spectrum ----------------------------------------------------------------------------------------


def test_spectrum_figure_plain_vermillion_conditioned_bluish_green_on_log_axis() -> None:
    report = spectrum_report()
    emb = report["embedding"]
    ax = plots.spectrum_figure(report).axes[0]
    red = [ln for ln in ax.get_lines() if ln.get_color() == PLAIN]  # the paper's red, colour-blind safe
    green = [ln for ln in ax.get_lines() if ln.get_color() == COND]
    assert len(red) == len(green) == 1
    np.testing.assert_array_equal(red[0].get_xdata(), np.arange(1, 9))
    np.testing.assert_allclose(red[0].get_ydata(), emb["spectrum"]["median"])
    np.testing.assert_array_equal(green[0].get_xdata(), np.arange(1, 9))
    np.testing.assert_allclose(green[0].get_ydata(), emb["spectrum_conditioned"]["median"])
    assert "X" in str(red[0].get_label()) and f"{emb['kappa']['median']:.3g}" in str(red[0].get_label())
    label = str(green[0].get_label())
    assert "X + λ·I_k" in label and f"λ = {LAM:g}" in label
    assert f"{emb['kappa_conditioned']['median']:.3g}" in label
    assert ax.get_yscale() == "log"
    assert len(ax.collections) == 2  # the two p10–p90 bands, one per colour
    colors = sorted(tuple(c.get_facecolor()[0][:3]) for c in ax.collections)
    assert colors == sorted([to_rgba(PLAIN)[:3], to_rgba(COND)[:3]])
    assert "timm:vit_tiny_test" in ax.get_title()
    assert ax.get_xlabel() and ax.get_ylabel()


def test_spectrum_figure_masks_non_positive_sigma(tmp_path: Path) -> None:
    report = spectrum_report()
    spec = report["embedding"]["spectrum"]
    spec["median"][-1] = 0.0
    spec["p10"][-1] = -1e-20
    fig = plots.spectrum_figure(report)
    red = line(fig.axes[0], "σ_i(X) (", PLAIN)
    y = np.asarray(red.get_ydata(), dtype=np.float64)
    assert np.isnan(y[-1])
    np.testing.assert_allclose(y[:-1], spec["median"][:-1])
    (path,) = plots.write_figures({"s": fig}, tmp_path, "png")  # draws without a log-axis error
    assert path.stat().st_size > 0


# --- layers ------------------------------------------------------------------------------------------


def test_layers_figure_plain_and_conditioned_medians() -> None:
    report = spectrum_report()
    fig = plots.layers_figure(report)
    assert fig is not None
    left, right = fig.axes
    assert left.get_yscale() == right.get_yscale() == "log"
    ls = report["layers"]
    idx = [lay["index"] for lay in ls]
    plain = line(left, "κ(X_l)", PLAIN)
    cond = line(left, f"κ(X_l), X + {LAM:g}·I_k", COND)  # the conditioned forward by its λ (issue 41)
    np.testing.assert_array_equal(plain.get_xdata(), idx)
    np.testing.assert_allclose(plain.get_ydata(), [lay["kappa"]["median"] for lay in ls])
    np.testing.assert_allclose(cond.get_ydata(), [lay["conditioned"]["kappa"]["median"] for lay in ls])
    np.testing.assert_allclose(
        line(left, "κ(A_l)", PLAIN).get_ydata(), [lay["kappa_attn_input"]["median"] for lay in ls]
    )
    np.testing.assert_allclose(
        line(right, "μ(LA)", PLAIN).get_ydata(), [lay["mu_la"]["median"] for lay in ls]
    )
    np.testing.assert_allclose(
        line(right, f"μ(LA), X + {LAM:g}·I_k", COND).get_ydata(),
        [lay["conditioned"]["mu_la"]["median"] for lay in ls],
    )


def test_layers_figure_draws_inf_as_marker_above_finite_values() -> None:
    report = spectrum_report()
    report["layers"][1]["kappa"] = agg([math.inf, math.inf, 5.0])
    assert report["layers"][1]["kappa"]["median"] == "inf"
    fig = plots.layers_figure(report)
    assert fig is not None
    left = fig.axes[0]
    plain = line(left, "κ(X_l)", PLAIN, exact=True)
    y = np.asarray(plain.get_ydata(), dtype=np.float64)
    assert np.isnan(y[1]) and np.isfinite(y[[0, 2]]).all()  # the line breaks there ...
    marker = line(left, "κ(X_l): inf", PLAIN)  # ... and a marker takes its place
    assert marker.get_marker() == "^"
    np.testing.assert_array_equal(marker.get_xdata(), [1])
    finite_max = max(
        np.nanmax(np.asarray(ln.get_ydata(), dtype=np.float64)) for ln in left.get_lines() if ln is not marker
    )
    assert marker.get_ydata()[0] > finite_max
    assert left.get_ylim()[1] >= marker.get_ydata()[0]  # and it is inside the axis
    assert mathtext("κ(X_l): inf") in [t.get_text() for t in left.get_legend().get_texts()]


def test_layers_figure_none_without_layers() -> None:
    assert plots.layers_figure(spectrum_report(num_layers=0)) is None


def test_layers_figure_without_conditioned_forward_has_only_plain_lines() -> None:
    fig = plots.layers_figure(spectrum_report(conditioned=False))
    assert fig is not None
    for ax in fig.axes:
        colors = {ln.get_color() for ln in ax.get_lines()}
        assert colors == {PLAIN}
        assert not any("I_k" in str(ln.get_label()) for ln in ax.get_lines())


# --- sweep -------------------------------------------------------------------------------------------


def test_sweep_figure_curves_and_reference_lines() -> None:
    report = sweep_report(with_layers=False)
    sw = report["sweep"]
    fig = plots.sweep_figure(report)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    med = line(ax, "κ(X + λ·I_k), median")
    np.testing.assert_array_equal(med.get_xdata(), sw["lambdas"])
    np.testing.assert_allclose(med.get_ydata(), sw["kappa"]["median"])
    assert len(ax.collections) == 1  # the p10–p90 band
    weyl = line(ax, "Weyl")
    assert weyl.get_linestyle() == "--"
    x, y = np.asarray(weyl.get_xdata()), np.asarray(weyl.get_ydata(), dtype=np.float64)
    drawn = np.isfinite(y)  # the "inf" points (no bound at that λ) are not drawn
    np.testing.assert_array_equal(x[drawn], sw["lambdas"][3:])
    np.testing.assert_allclose(y[drawn], sw["weyl_bound"][3:])
    assert line(ax, "κ(X + C)").get_ydata()[0] == pytest.approx(sw["kappa_corrected"])
    assert line(ax, "κ(X) =").get_ydata()[0] == pytest.approx(sw["kappa_plain"])
    target = line(ax, "target κ")
    assert target.get_ydata()[0] == pytest.approx(sw["target_kappa"]) and target.get_linestyle() == ":"
    rec = line(ax, "recommended λ")
    np.testing.assert_array_equal(rec.get_xdata(), [4.0, 4.0])  # a vertical line at λ = 4


def test_sweep_figure_without_recommended_lambda_has_no_vertical_line() -> None:
    ax = plots.sweep_figure(sweep_report(with_layers=False, recommended=None)).axes[0]
    assert not any("recommended" in str(ln.get_label()) for ln in ax.get_lines())


def test_sweep_figure_per_layer_axis_graded_by_depth() -> None:
    report = sweep_report(with_layers=True)
    fig = plots.sweep_figure(report)
    ax = fig.axes[1]  # fig.axes[2] is the depth colorbar
    assert ax.get_yscale() == "log"
    lines = ax.get_lines()
    assert len(lines) == 4
    for ln, lay in zip(lines, report["sweep"]["layers"], strict=True):
        np.testing.assert_array_equal(ln.get_xdata(), report["sweep"]["lambdas"])
        np.testing.assert_allclose(ln.get_ydata(), lay["kappa_median"])
    colors = {to_rgba(ln.get_color()) for ln in lines}
    assert len(colors) == 4  # one colour per depth


# --- writing -----------------------------------------------------------------------------------------


MAGIC = {"png": b"\x89PNG", "pdf": b"%PDF"}
STAMP = {"png": b"Software", "svg": b"<dc:date>", "pdf": b"/CreationDate"}


@pytest.mark.parametrize("fmt", plots.FORMATS)
def test_write_figures_formats_and_determinism(tmp_path: Path, fmt: str) -> None:
    report = spectrum_report(num_layers=2)
    first = plots.spectrum_plots(report, tmp_path / "a", fmt)
    assert [p.name for p in first] == [f"spectrum.{fmt}", f"layers.{fmt}"]
    for path in first:
        data = path.read_bytes()
        assert b"<svg" in data if fmt == "svg" else data.startswith(MAGIC[fmt])
        assert STAMP[fmt] not in data  # no date or version stamp in the file
    if fmt in ("svg", "png"):
        second = plots.spectrum_plots(report, tmp_path / "b", fmt)
        assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_plot_writers_name_their_files(tmp_path: Path) -> None:
    assert [p.name for p in plots.spectrum_plots(spectrum_report(num_layers=0), tmp_path, "svg")] == [
        "spectrum.svg"
    ]
    assert [p.name for p in plots.sweep_plots(sweep_report(), tmp_path, "svg")] == ["sweep.svg"]


def test_write_figures_rejects_unknown_format(tmp_path: Path) -> None:
    fig = plots.spectrum_figure(spectrum_report())
    with pytest.raises(UsageError) as err:
        plots.write_figures({"spectrum": fig}, tmp_path, "jpg")
    assert err.value.hint and "png" in err.value.hint
    with pytest.raises(UsageError):
        plots.sweep_plots(sweep_report(), tmp_path, "gif")
    assert list(tmp_path.iterdir()) == []
