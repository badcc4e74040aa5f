"""condcli's float64 spectral core: pure torch, batched over leading dims, device-agnostic, no I/O.

The four names of docs/math.md#cli — :func:`singular_values`, :func:`condition_number`,
:func:`shifted_condition_number` and :func:`corrected_condition_number` — are a public contract.
"""

from condcli.spectra.aggregate import Aggregate, ScalarStream, aggregate, json_float
from condcli.spectra.bands import SpectrumBand, SpectrumStream, spectrum_band
from condcli.spectra.bounds import (
    mu_linear_attention,
    mu_softmax_attention,
    supplement_estimate,
    supplement_lambda_for_target,
    weyl_bound,
    weyl_lambda_for_target,
)
from condcli.spectra.core import (
    GRAM_MAX_KAPPA,
    SpectrumSummary,
    below_precision,
    condition_number,
    kappa_from_sigma,
    numerical_rank,
    precision_tolerance,
    singular_values,
    summarize,
)
from condcli.spectra.entropy import COLLAPSED_HEAD, SINK_HEAD, SINK_SKIP, attention_entropy, sink_score
from condcli.spectra.ranks import (
    collapse_residual,
    cumulative_spectrum,
    effective_rank,
    effective_rank_of_spectrum,
    rank_at_fraction,
    stable_rank,
    stable_rank_of_spectrum,
)
from condcli.spectra.shift import (
    corrected_condition_number,
    corrected_kappa_from_sigma,
    correction,
    identity_k,
    shift,
    shifted_condition_number,
)

__all__ = [
    "COLLAPSED_HEAD",
    "GRAM_MAX_KAPPA",
    "SINK_HEAD",
    "SINK_SKIP",
    "Aggregate",
    "ScalarStream",
    "SpectrumBand",
    "SpectrumStream",
    "SpectrumSummary",
    "aggregate",
    "attention_entropy",
    "below_precision",
    "collapse_residual",
    "condition_number",
    "corrected_condition_number",
    "corrected_kappa_from_sigma",
    "correction",
    "cumulative_spectrum",
    "effective_rank",
    "effective_rank_of_spectrum",
    "identity_k",
    "json_float",
    "kappa_from_sigma",
    "mu_linear_attention",
    "mu_softmax_attention",
    "numerical_rank",
    "precision_tolerance",
    "rank_at_fraction",
    "shift",
    "shifted_condition_number",
    "singular_values",
    "sink_score",
    "spectrum_band",
    "stable_rank",
    "stable_rank_of_spectrum",
    "summarize",
    "supplement_estimate",
    "supplement_lambda_for_target",
    "weyl_bound",
    "weyl_lambda_for_target",
]
