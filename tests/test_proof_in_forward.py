"""The generic reading proven in the capture's own first forward (condcli/analysis/proof.py, InForward): the
same report, bitwise, as proving it in a forward of its own first; one forward fewer where the reading
stands; the run started again on the proven model where the proof chose another reading or refused a layer;
and a runner that never proves is an error, not an unproven number."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import condcli.analysis.driver as driver_mod
from condcli import api
from condcli.adapters.base import Adapter
from condcli.analysis.proof import InForward, in_forward
from condcli.analysis.runs import RunOptions, setup_run
from condcli.errors import InternalError

TOYS = {
    "plain": "tests.toy_readings:plain",  # proven as first read
    "per_head_fused": "tests.toy_readings:per_head_fused",  # another reading proven: the run starts again
    "parameters_linear": "tests.toy_readings:parameters_linear",  # the same, by a parameter's orientation
    "mixed": "tests.toy_readings:mixed",  # layer 1 refused: the run starts again without it
    "llama": "llama-docstrings",  # the shipped LLM sample (generic path, GQA, RoPE, a causal mask)
}
AGAIN = {"per_head_fused", "parameters_linear", "mixed"}


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every forward condcli runs through an adapter, counted."""
    calls = [0]
    run = Adapter.run

    def counting(self: Adapter, inputs: Any) -> Any:
        calls[0] += 1
        return run(self, inputs)

    monkeypatch.setattr(Adapter, "run", counting)
    return calls


def _report(model: str, monkeypatch: pytest.MonkeyPatch, *, fused: bool) -> tuple[dict[str, Any], int]:
    """The JSON report of ``spectrum`` (one batch, plain forward only) and how many forwards it ran."""
    with monkeypatch.context() as m:
        calls = _counted(m)
        if not fused:  # the proof in a forward of its own, before the capture (as before issue 43)
            m.setattr(driver_mod, "runs_eager", lambda *a, **k: False)
        report = api.spectrum(model, max_samples=1, conditioned=False, heads=True)
    return report.to_json(), calls[0]


@pytest.mark.parametrize("toy", sorted(TOYS))
def test_the_report_is_bitwise_the_same_proven_in_the_capture_or_apart(
    toy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fused, fused_forwards = _report(TOYS[toy], monkeypatch, fused=True)
    apart, apart_forwards = _report(TOYS[toy], monkeypatch, fused=False)
    assert fused == apart
    sources = {layer["qkv_source"] for layer in fused["layers"]}
    assert sources == {"generic (verified)"}, sources
    assert any("proven on the first batch" in note for note in fused["notes"])
    # apart: the proof's forward, then the capture's; fused: the capture's alone, unless the proof changed a
    # reading (then that forward's numbers are dropped and the run captures again on the proven model)
    assert apart_forwards == 2
    assert fused_forwards == (2 if toy in AGAIN else 1)
    if toy == "mixed":
        assert [layer["index"] for layer in fused["layers"]] == [0]
        assert [r["index"] for r in fused["layers_refused"]] == [1]


def test_a_model_whose_every_reading_is_contradicted_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from condcli.errors import InputError

    with pytest.raises(InputError, match="could not be proven on its first batch"):
        api.spectrum("tests.toy_readings:swapped", max_samples=1, conditioned=False)


def test_a_runner_that_never_proves_the_reading_is_an_internal_error() -> None:
    """A runner handed a model with a pending proof that never drives a forward through it: no number of
    an unproven reading leaves the run."""
    setup = setup_run(RunOptions(model="tests.toy_readings:plain", max_samples=1))
    assert isinstance(in_forward(setup.loaded, None), InForward)

    def reads_but_never_drives(loaded: Any, inputs: Any, options: Any, model_from: str, progress: Any) -> int:
        return sum(batch.size for batch in inputs)

    @dataclasses.dataclass(frozen=True)
    class Options:
        layers: None = None

    with pytest.raises(InternalError, match="never proven"):
        setup.analyse("toy", reads_but_never_drives, Options())


def test_nothing_is_pending_where_no_chosen_layer_is_read_by_the_generic_path() -> None:
    family = setup_run(RunOptions(model="vit-plain", max_samples=1)).loaded
    assert in_forward(family, None) is None
    generic = setup_run(RunOptions(model="tests.toy_readings:plain", max_samples=1)).loaded
    assert in_forward(generic, []) is None  # `--layers none`: X alone, no reading touched
