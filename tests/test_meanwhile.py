"""The model constants beside the forward (condcli/analysis/meanwhile.py): the same report, bitwise, whether
κ of the whole projections and κ(E) ran on a thread of their own during the forward or after it; their
error raised after the forward; and the work beside on one core, without autograd."""

from __future__ import annotations

import threading
from contextlib import nullcontext
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import condcli.analysis.spectrum as spectrum_mod
from condcli.adapters.base import join_heads
from condcli.analysis.layers import weight_kappas
from condcli.analysis.meanwhile import Meanwhile, after_the_forward, beside_pays
from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, stream
from condcli.loading.samples import samples_dir
from condcli.loading.sources import LoadedModel, LoadOptions, load
from condcli.spectra.strategies import concurrently, in_order
from tests.recording import replay

SAMPLE = "llama-docstrings"  # grouped-query attention and an embedding table: every constant there is


@pytest.fixture(scope="module")
def llama() -> tuple[LoadedModel, list[Any]]:
    loaded = load(SAMPLE, LoadOptions(device="cpu"))
    spec = InputSpec(text=samples_dir() / SAMPLE / "prompts.txt", max_samples=3, batch_size=2)
    return loaded, list(stream(loaded.preprocessing, spec))


def _report(loaded: LoadedModel, batches: list[Any], beside: bool, monkeypatch: Any) -> dict[str, Any]:
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # beside wherever the forward allows it
    with nullcontext() if beside else after_the_forward():
        report = analyse_spectrum(loaded, replay(batches), SpectrumOptions(lam=10.0, heads=True), "test")
    out = report.to_json()
    out.pop("tool", None)
    return out


def test_the_report_is_bitwise_the_same_beside_the_forward_or_after_it(llama: Any, monkeypatch: Any) -> None:
    loaded, batches = llama
    where: list[tuple[str, bool]] = []
    whole = spectrum_mod.whole_kappas_of

    def recorded(weights: Any) -> Any:
        where.append((threading.current_thread().name, torch.is_grad_enabled()))
        return whole(weights)

    monkeypatch.setattr(spectrum_mod, "whole_kappas_of", recorded)
    after = _report(loaded, batches, False, monkeypatch)
    beside = _report(loaded, batches, True, monkeypatch)
    assert where[0][0] == threading.current_thread().name
    assert where[1] == ("condcli-meanwhile", False)  # its own thread, recording no graph
    assert beside == after
    assert beside["embedding_table"]["kappa"] > 1  # the constants are in it
    first = beside["layers"][0]
    heads = loaded.adapter.layers[0].weights()
    w = weight_kappas(heads)
    assert first["kappa_wq"] == w.wq and first["kappa_wv_heads"] == list(w.wv_heads)
    sigma = np.linalg.svd(join_heads(heads.wq).numpy(), compute_uv=False)  # float64, independent
    assert first["kappa_wq"] == pytest.approx(sigma[0] / sigma[-1], rel=1e-10)


@pytest.mark.parametrize("beside", [True, False])
def test_an_error_of_the_constants_is_raised_after_the_forward(
    llama: Any, monkeypatch: Any, beside: bool
) -> None:
    loaded, batches = llama
    seen: list[int] = []
    take = spectrum_mod.ForwardAccumulator.add

    def counted(self: Any, layer: Any, lengths: Any) -> None:
        seen.append(layer.index)
        take(self, layer, lengths)

    def damaged(loaded: LoadedModel) -> None:
        raise InputError("the table holds 1 NaN/Inf value(s)", "the weights are damaged")

    monkeypatch.setattr(spectrum_mod.ForwardAccumulator, "add", counted)
    monkeypatch.setattr(spectrum_mod, "_embedding_table", damaged)
    with pytest.raises(InputError, match="NaN/Inf"):
        _report(loaded, batches, beside, monkeypatch)
    assert seen  # the forward ran and its layers were analysed before the error was raised


def test_meanwhile_beside_runs_on_its_own_thread_and_hands_back_value_and_error() -> None:
    names: list[str] = []

    def work() -> int:
        names.append(threading.current_thread().name)
        return 7

    beside = Meanwhile(work, beside=True)
    beside.start()
    beside.start()  # once
    assert beside.result() == 7 and beside.result() == 7
    assert names == ["condcli-meanwhile"]
    lazy = Meanwhile(work, beside=False)
    lazy.start()  # not beside: nothing runs until the result is asked for
    assert names == ["condcli-meanwhile"]
    assert lazy.result() == 7 and lazy.result() == 7  # once
    assert names == ["condcli-meanwhile", threading.current_thread().name]

    def fails() -> int:
        raise InputError("broken", "fix it")

    for on in (True, False):
        failing = Meanwhile(fails, beside=on)
        failing.start()
        with pytest.raises(InputError, match="broken"):
            failing.result()


def test_discarded_work_is_waited_for_where_it_runs_and_never_started_otherwise() -> None:
    """A run started again (the proof changed a reading) discards the constants of the first reading: the
    thread computing them is over before the run starts again; work not yet started never runs."""
    release, ran = threading.Event(), []

    def slow() -> int:
        release.wait(5)
        ran.append("slow")
        return 1

    running = Meanwhile(slow, beside=True)
    running.start()
    threading.Timer(0.05, release.set).start()
    running.discard()
    assert ran == ["slow"]
    assert not any(t.name == "condcli-meanwhile" and t.is_alive() for t in threading.enumerate())
    for on in (True, False):
        idle = Meanwhile(lambda: ran.append("idle"), beside=on)
        idle.discard()
        idle.start()
        assert idle.result() is None
    assert ran == ["slow"]


def test_the_work_starts_once_the_first_batch_is_in_hand() -> None:
    events: list[str] = []
    work = Meanwhile(lambda: events.append("work"), beside=True)

    def batches() -> Any:
        events.append("iterated")  # where a DataLoader forks its workers
        yield from (1, 2)

    assert list(work.started(batches())) == [1, 2]
    work.result()
    assert events == ["iterated", "work"]


def test_in_order_runs_every_task_in_the_calling_thread(monkeypatch: Any) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)

    def name() -> str:
        return threading.current_thread().name

    pooled = concurrently([name, name, name])
    assert all(n.startswith("condcli-linalg") for n in pooled)
    with in_order():
        assert concurrently([name, name]) == [threading.current_thread().name] * 2
    assert all(n.startswith("condcli-linalg") for n in concurrently([name, name]))  # restored


def test_beside_pays_only_for_a_model_wholly_on_the_cpu_with_two_threads(monkeypatch: Any) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert beside_pays(model)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert not beside_pays(model)  # no idle core to fill
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    with after_the_forward():
        assert not beside_pays(model)
    assert beside_pays(model)
    with torch.device("meta"):
        offloaded = nn.Linear(4, 4)
    assert not beside_pays(nn.Sequential(nn.Linear(4, 4), offloaded))  # a module offloaded to disk
    model.register_buffer("moved", torch.zeros(1, device="meta"))
    assert not beside_pays(model)
