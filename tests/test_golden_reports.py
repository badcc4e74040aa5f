"""Every shipped sample's spectrum report is the one written to tests/golden/ (tests/golden_reports.py):
the same keys, strings, counts and flags, and every number within what its capture supports. A refactor
that changes a report fails here; an intended change rewrites the files
(``.venv/bin/python -m tests.golden_reports``) in the same commit."""

from __future__ import annotations

import json

import pytest

from tests.golden_reports import SAMPLES, differences, fresh, golden_path


@pytest.mark.parametrize("sample", SAMPLES)
def test_the_report_is_the_golden_one(sample: str) -> None:
    want = json.loads(golden_path(sample).read_text(encoding="utf-8"))
    found = differences(want, fresh(sample))
    assert not found, f"{len(found)} differences, the first: " + "; ".join(found[:5])


def test_the_comparison_sees_a_change() -> None:
    want = {"tool": {"version": "0"}, "a": {"median": 2.0, "rel_uncertainty": {"median": 0.01}}, "n": 3}
    assert (
        differences(
            want,
            {"tool": {"version": "1"}, "a": {"median": 2.01, "rel_uncertainty": {"median": 0.01}}, "n": 3},
        )
        == []
    )
    assert differences(want, {"tool": {}, "a": {"median": 2.1, "rel_uncertainty": {"median": 0.01}}, "n": 3})
    assert differences(want, {"tool": {}, "a": {"median": 2.0, "rel_uncertainty": {"median": 0.01}}, "n": 4})
    assert differences(want, {"tool": {}, "a": {"median": 2.0}, "n": 3})  # a key dropped
    assert differences({"x": 1.0}, {"x": 1.0 + 1e-5}) and not differences({"x": 1.0}, {"x": 1.0 + 1e-7})
    # a stated uncertainty one ulp of its inputs apart (another CPU's BLAS) is the same; twice it is not
    tiny = {"k": {"median": 12.9, "rel_uncertainty": {"median": 3.6615155352137663e-13}}}
    near = {"k": {"median": 12.9, "rel_uncertainty": {"median": 3.660405312189141e-13}}}
    far = {"k": {"median": 12.9, "rel_uncertainty": {"median": 7.3e-13}}}
    assert not differences(tiny, near) and differences(tiny, far)
    assert differences({"x": 3.66e-13}, {"x": 3.67e-13})  # a value, not an uncertainty: 1e-6 relative
