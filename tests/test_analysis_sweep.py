"""condcli.analysis.sweep: the λ grid, and every number of the sweep against an independent reference.

X is recaptured without condcli (timm's own ``_pos_embed(patch_embed(x))``, HF ``hidden_states[0]``), κ is
NumPy's float64 SVD of X + λ·eye(N, d) per sample, statistics are ``np.percentile``; per-layer κ comes from
timm's ``forward_intermediates`` of a model wrapped with ``condition_model``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch

from condcli.adapters import condition_model
from condcli.analysis.sweep import SweepOptions, analyse_sweep, lambda_grid, percentiles
from condcli.errors import InputError, UsageError
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadedModel, load
from condcli.reports.sweep import SweepReport
from tests.helpers import np_kappa, np_sigma

REL = 1e-9


@pytest.fixture(scope="module")
def vit() -> LoadedModel:
    return load("vit-plain")


def run(loaded: LoadedModel, options: SweepOptions, **spec: Any) -> SweepReport:
    return analyse_sweep(loaded, stream(loaded.preprocessing, InputSpec(**spec)), options, "test")


def vit_x(loaded: LoadedModel, **spec: Any) -> list[np.ndarray]:
    """X per sample from timm's own embedding code (no condcli hooks), float64."""
    m: Any = loaded.model
    out = []
    with torch.no_grad():
        for batch in stream(loaded.preprocessing, InputSpec(**spec)):
            x = m._pos_embed(m.patch_embed(batch.inputs["pixel_values"]))
            out.extend(x.double().numpy())
    return out


def np_shifted(xs: Sequence[np.ndarray], lambdas: Sequence[float]) -> np.ndarray:
    """(S, L): κ(X + λ·eye(N, d)) per sample by NumPy SVD."""
    return np.array([[float(np_kappa(x + lam * np.eye(*x.shape))) for lam in lambdas] for x in xs])


def close(got: Sequence[float], want: np.ndarray, rel: float = REL) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rel, atol=0)


# --------------------------------------------------------------------------- the grid


def test_default_grid_is_the_papers_1_to_20() -> None:
    assert lambda_grid(None, None, None) == tuple(float(v) for v in range(1, 21))


def test_range_is_linear_and_inclusive_lambdas_are_sorted_and_unique() -> None:
    assert lambda_grid((0.5, 2.0), 4, None) == (0.5, 1.0, 1.5, 2.0)
    assert (
        lambda_grid((0.0, 10.0), None, None)[-1] == 10.0 and len(lambda_grid((0.0, 10.0), None, None)) == 20
    )
    assert lambda_grid(None, None, [10, 1, 5, 1, 2]) == (1.0, 2.0, 5.0, 10.0)


@pytest.mark.parametrize(
    ("value_range", "steps", "lambdas", "text"),
    [
        ((1.0, 20.0), None, [1.0], "value_range and lambdas"),
        (None, 5, [1.0], "steps goes with value_range"),
        ((-1.0, 5.0), None, None, "≥ 0"),
        (None, None, [1.0, -2.0], "lambdas=1,-2"),
        ((5.0, 1.0), None, None, "LO must be smaller"),
        ((3.0, 3.0), None, None, "LO must be smaller"),
        ((1.0, 20.0), 0, None, "steps must be at least 2"),
        ((1.0, 20.0), 1, None, "steps must be at least 2"),
        ((1.0, float("inf")), None, None, "finite"),
        (None, None, [float("nan")], "finite"),
    ],
)
def test_bad_grids_are_usage_errors(
    value_range: tuple[float, float] | None, steps: int | None, lambdas: list[float] | None, text: str
) -> None:
    with pytest.raises(UsageError, match=text):
        lambda_grid(value_range, steps, lambdas)


def test_percentiles_match_numpy_and_keep_inf() -> None:
    rng = np.random.default_rng(0)
    v = rng.random((7, 3))
    for q in (10, 50, 90):
        np.testing.assert_array_equal(percentiles(v, q), np.percentile(v, q, axis=0))
    inf = np.inf
    col = np.array([[1.0], [3.0], [inf], [inf]])  # sorted positions 0.3, 1.5, 2.7 for q 10, 50, 90
    assert percentiles(col, 10)[0] == pytest.approx(1.6)
    assert percentiles(col, 50)[0] == inf and percentiles(col, 90)[0] == inf
    assert percentiles(np.array([[inf], [inf]]), 10)[0] == inf  # NumPy gives NaN here
    assert percentiles(np.array([[2.0], [inf]]), 0)[0] == 2.0


# --------------------------------------------------------------------------- vit-plain against NumPy


LAMS = (0.5, 2.0, 5.0, 12.0, 30.0)


@pytest.fixture(scope="module")
def vit_sweep(vit: LoadedModel) -> SweepReport:
    return run(vit, SweepOptions(LAMS, target_kappa=2.0), max_samples=5, batch_size=2)


def test_kappa_band_bounds_and_references_equal_numpy(vit: LoadedModel, vit_sweep: SweepReport) -> None:
    xs = vit_x(vit, max_samples=5, batch_size=5)
    kappa = np_shifted(xs, LAMS)
    s = vit_sweep.sweep
    assert s.lambdas == LAMS and vit_sweep.inputs.count == 5
    close(s.kappa_median, np.percentile(kappa, 50, axis=0))
    close(s.kappa_p10, np.percentile(kappa, 10, axis=0))
    close(s.kappa_p90, np.percentile(kappa, 90, axis=0))
    assert s.kappa_inf_count == (0,) * len(LAMS)
    sigma = np.array([np_sigma(x) for x in xs])
    s1, sk = sigma[:, 0:1], sigma[:, -1:]
    lam = np.array(LAMS)[None]
    weyl = np.where(lam > s1, (s1 + lam) / np.where(lam > s1, lam - s1, 1.0), np.inf)
    assert np.isinf(weyl[:, 0]).all() and np.isfinite(weyl[:, -1]).all()  # σ_1 ≈ 9–10 for this model
    close(s.weyl_bound, np.median(weyl, axis=0))
    close(s.supplement_estimate, np.median((s1 + lam) / (lam - sk), axis=0))
    close([s.weyl_lambda_for_target], np.array([np.median(s1[:, 0] * 3.0)]))  # σ_1 (t+1)/(t−1), t = 2
    close([s.kappa_plain], np.array([np.median(np_kappa(np.stack(xs)))]))
    close([s.kappa_corrected], np.array([np.median(2 * s1[:, 0] / (s1[:, 0] + sk[:, 0]))]))
    # the Weyl bound really bounds every sample's κ where it exists
    assert (kappa <= weyl * (1 + 1e-12)).all()
    # the smallest λ whose NumPy median meets the target
    med = np.median(kappa, axis=0)
    assert s.recommended_lambda == LAMS[int(np.nonzero(med <= 2.0)[0][0])]
    assert s.layers is None and vit_sweep.embedding.spectrum is None


def test_results_do_not_depend_on_the_batch_size(vit: LoadedModel, vit_sweep: SweepReport) -> None:
    other = run(vit, SweepOptions(LAMS, target_kappa=2.0), max_samples=5, batch_size=5).sweep
    s = vit_sweep.sweep
    for a, b in ((s.kappa_median, other.kappa_median), (s.kappa_p10, other.kappa_p10)):
        close(a, np.asarray(b))
    assert s.recommended_lambda == other.recommended_lambda


def test_unreachable_target_gives_no_recommendation_and_a_hint(vit: LoadedModel) -> None:
    lams = (0.001, 0.0015, 0.002)
    report = run(vit, SweepOptions(lams, target_kappa=2.0), max_samples=3)
    s = report.sweep
    want = np.median(np_shifted(vit_x(vit, max_samples=3), lams), axis=0)
    close(s.kappa_median, want)
    assert (want > 2.0).all() and s.recommended_lambda is None
    assert (
        s.recommendation.startswith("none in range") and "`value_range=0.001 " in s.recommendation
    )  # the CLI prints --range
    assert s.to_json()["recommended_lambda"] is None


def test_layers_follow_the_conditioned_forward(vit: LoadedModel) -> None:
    lams = (0.5, 10.0)
    report = run(vit, SweepOptions(lams, layers=[0, 2, -1]), max_samples=3, batch_size=2)
    layers = report.sweep.layers
    assert layers is not None and [layer.index for layer in layers] == [0, 2, 5]
    (batch,) = stream(vit.preprocessing, InputSpec(max_samples=3, batch_size=3))
    img = batch.inputs["pixel_values"]

    def x_layers(model: Any) -> list[np.ndarray]:  # X_l entering each block, from timm itself
        # the model's own (fused) attention, as condcli runs it where no P is captured
        assert all(m.fused_attn for m in model.modules() if hasattr(m, "fused_attn"))
        with torch.no_grad():
            x0 = model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(img))))
            inter = model.forward_intermediates(
                img, return_prefix_tokens=True, output_fmt="NLC", intermediates_only=True
            )
        xs = [x0] + [torch.cat([prefix, spatial], dim=1) for spatial, prefix in inter[:-1]]
        return [t.double().numpy() for t in xs]

    def medians(model: Any) -> list[float]:
        xs = x_layers(model)
        return [float(np.median(np_kappa(xs[i]))) for i in (0, 2, 5)]

    plain = medians(copy.deepcopy(vit.model))
    close([layer.kappa_plain_median for layer in layers], np.array(plain), rel=1e-5)
    for j, lam in enumerate(lams):
        want = medians(condition_model(copy.deepcopy(vit.model), lam=lam))
        close([layer.kappa_median[j] for layer in layers], np.array(want), rel=1e-5)
    # layer 0 sees X + λI_k (float32): its κ is the sweep's κ(X + λI_k)
    close(list(layers[0].kappa_median), np.asarray(report.sweep.kappa_median), rel=1e-5)
    assert report.settings.conditioned_forward


def test_builtin_conditioning_refuses_layers_but_sweeps_x() -> None:
    loaded = load("vit-conditioned")
    with pytest.raises(UsageError, match="already is the conditioned one"):
        run(loaded, SweepOptions((1.0, 2.0), layers=[0]), max_samples=1)
    report = run(loaded, SweepOptions((1.0, 2.0), layers=()), max_samples=2)
    assert report.sweep.layers is None and any("before the model's own" in n for n in report.notes)


def test_out_of_range_layer_is_an_input_error(vit: LoadedModel) -> None:
    with pytest.raises(InputError, match="layers asks for a layer"):
        run(vit, SweepOptions((1.0, 2.0), layers=[6]), max_samples=1)


# --------------------------------------------------------------------------- padded text


@pytest.mark.parametrize("name", ["gpt2-docstrings", "bert-docstrings"])
def test_text_samples_use_only_their_unpadded_rows(name: str) -> None:
    loaded = load(name)
    lams = (1.0, 4.0, 16.0)
    report = run(loaded, SweepOptions(lams), max_samples=5, batch_size=5)
    xs, lengths = [], []
    with torch.no_grad():
        for batch in stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=5)):
            mask = batch.inputs["attention_mask"]
            hs = loaded.model(**batch.inputs, output_hidden_states=True).hidden_states[0]
            for b in range(hs.shape[0]):
                n = int(mask[b].sum())
                lengths.append(n)
                xs.append(hs[b, :n].double().numpy())
    assert len(set(lengths)) > 1  # the batch really was padded
    kappa = np_shifted(xs, lams)
    s = report.sweep
    close(s.kappa_median, np.percentile(kappa, 50, axis=0))
    close(s.kappa_p10, np.percentile(kappa, 10, axis=0))
    close(s.kappa_p90, np.percentile(kappa, 90, axis=0))
    one_by_one = run(loaded, SweepOptions(lams), max_samples=5, batch_size=1).sweep  # no padding at all
    close(one_by_one.kappa_median, np.asarray(s.kappa_median))
