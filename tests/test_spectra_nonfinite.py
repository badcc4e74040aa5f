"""NaN/Inf input: every function refuses with an error that names the sample (never a silent number).

The choice, documented in condcli.errors.NonFiniteInputError: a spectrum of a non-finite matrix is
meaningless, so condcli raises (exit code 2 in the CLI) instead of skipping the sample or returning NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from condcli import spectra
from condcli.errors import NonFiniteInputError

FUNCS: list[Callable[[np.ndarray], object]] = [
    spectra.singular_values,
    spectra.condition_number,
    lambda X: spectra.condition_number(X, method="svd"),
    lambda X: spectra.shifted_condition_number(X, [1.0, 10.0]),
    spectra.corrected_condition_number,
    spectra.correction,
    spectra.summarize,
    spectra.numerical_rank,
    spectra.effective_rank,
    spectra.stable_rank,
    spectra.collapse_residual,
    lambda X: spectra.shift(X, 10.0),
]


@pytest.mark.parametrize("func", FUNCS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_batch_error_names_the_sample(func: Callable[[np.ndarray], object], bad: float) -> None:
    X = np.random.default_rng(40).standard_normal((4, 5, 6))
    X[2, 1, 3] = bad
    X[2, 4, 0] = bad
    X[3, 0, 0] = bad
    with pytest.raises(NonFiniteInputError, match=r"^sample 2 contains 2 NaN/Inf") as info:
        func(X)
    assert info.value.sample == 2 and info.value.exit_code == 2
    assert "dtype=float32" in str(info.value)


def test_single_matrix_error_says_the_matrix_and_offset_names_the_stream_index() -> None:
    X = torch.ones(3, 3)
    X[0, 0] = torch.nan
    with pytest.raises(NonFiniteInputError, match=r"^the matrix contains 1 NaN/Inf") as info:
        spectra.condition_number(X)
    assert str(info.value.shifted(64)).startswith("sample 64 contains 1")
    Y = torch.ones(2, 2, 3, 3)
    Y[1, 0, 2, 2] = torch.inf  # leading dims are flattened: (1, 0) is sample 2
    with pytest.raises(NonFiniteInputError, match=r"^sample 2 "):
        spectra.singular_values(Y)
