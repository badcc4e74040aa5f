"""The family conformance test: every family in ``condcli.adapters.FAMILIES`` meets the same contract.

timm's ``tests/test_models.py`` pattern: the tests are parametrised over the adapter registry, each family's
tiny model comes from the table in ``tests/families.py``, and a registered family without a case there
fails here. Per family, through :func:`condcli.capture.capture` and the adapter's LayerSpec/HeadWeights:
X against the library's own tensor, X_l and A_l against ``hidden_states`` / ``forward_intermediates`` /
the model's modules called in order / the test's own hooks, P against ``output_attentions`` (HF eager) or a
float64 recomputation (or the family says that P is not observable), P·V against what the model fed to its
output projection, the W slices against the module's weights, and no hooks left, switches restored and the
output bitwise unchanged, after a capture and after a forward that raised.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import torch
from torch import nn

from condcli.adapters import FAMILIES, adapter_for
from condcli.adapters.base import Adapter
from condcli.adapters.generic.verify import prove
from condcli.capture import Capture, capture
from condcli.inputs.batches import Batch
from tests.conformance_cases import CASES
from tests.families import F64, Case, Site, project
from tests.recording import assert_same_capture

Tensor = torch.Tensor


@dataclass
class Reference:
    """Everything the test computes itself for one model and one batch."""

    x: Tensor  # (B, N, d) X, padding rows included
    x_layers: list[Tensor]  # X_l (B, N_l, d_l)
    a_layers: list[Tensor]  # A_l (B, G, n, c): the attention module's input, seen by the test's own hook
    pv: list[Tensor]  # (B, G, n, H·d_h): what the model fed to its output projection, less Site.extra
    probs: list[Tensor | None]  # P (B, G, H, q, k); None where the family cannot observe it


@contextmanager
def recording(sites: list[Site], batch: int) -> Iterator[tuple[list[Tensor], list[Tensor]]]:
    """The test's own hooks: each attention module's input (A_l) and each output projection's input."""
    a: list[Tensor] = [torch.empty(0)] * len(sites)
    pv = list(a)
    # a module shared by several sites (ALBERT's one layer) gives its k-th call to the k-th of them
    readers: dict[tuple[int, int], list[int]] = {}
    calls: dict[tuple[int, int], int] = {}

    def grab(store: list[Tensor], key: tuple[int, int], args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        x = args[0] if args else kw["hidden_states"]
        k, sites_of = calls.get(key, 0), readers[key]
        calls[key] = k + 1
        i = sites_of[min(k, len(sites_of) - 1)]  # calls beyond them: the last call wins, as with one site
        x = x.flatten(1, 2) if x.ndim == 4 else x  # channels-last windows (B·G, h, w, c) → (B·G, h·w, c)
        store[i] = x.detach().reshape(batch, -1, *x.shape[-2:])  # (B·G, n, c) → (B, G, n, c)

    def grab_input(store: list[Tensor], key: tuple[int, int], _m: nn.Module, args: Any, kw: Any) -> None:
        grab(store, key, args, kw)

    def grab_output(store: list[Tensor], key: tuple[int, int], _m: nn.Module, _a: Any, out: Any) -> None:
        grab(store, key, (out[0] if isinstance(out, tuple) else out,), {})

    handles = []
    for i, s in enumerate(sites):
        out = s.attn if s.proj is None else s.proj
        for store, module, after in ((a, s.attn, False), (pv, out, s.proj is None)):
            key = (id(store), id(module))
            readers.setdefault(key, []).append(i)
            if len(readers[key]) > 1:
                continue  # hooked already
            if after:
                handle = module.register_forward_hook(partial(grab_output, store, key))
            else:
                handle = module.register_forward_pre_hook(partial(grab_input, store, key), with_kwargs=True)
            handles.append(handle)
    try:
        yield a, pv
    finally:
        for h in handles:
            h.remove()


def reference(case: Case, model: Any, batch: Batch, sites: list[Site]) -> Reference:
    """X, X_l, A_l, P·V and P from the model's own forward (HF: eager, with its output flags)."""
    with torch.no_grad(), recording(sites, batch.size) as (a, pv):
        if case.layers is not None:
            x, x_layers = case.layers(model, batch.inputs["pixel_values"])
            library_probs: list[Tensor | None] = [None] * len(sites)
        else:
            impl = model.config._attn_implementation
            model.set_attn_implementation("eager")
            model.config._attn_implementation = "eager"  # models that refuse the switch read it (Falcon)
            try:
                out = model(**batch.inputs, output_hidden_states=True, output_attentions=True)
            finally:
                model.set_attn_implementation(impl)
                model.config._attn_implementation = impl
            x, x_layers = out.hidden_states[0], list(out.hidden_states[: len(sites)])
            library_probs = [p.unsqueeze(1) for p in out.attentions]  # (B, H, q, k) → (B, 1, H, q, k)
    probs = [
        mine if s.probs is None else s.probs(*attended(s, t)[:2])
        for s, t, mine in zip(sites, a, library_probs, strict=True)
    ]
    pv = [t if s.extra is None else t - s.extra(at) for s, at, t in zip(sites, a, pv, strict=True)]
    return Reference(x, x_layers, a, pv, probs)


def attended(site: Site, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The per-head q, k, v (float64) the module attends with: ``site.attend`` of A_l, else A_l projected."""
    if site.attend is not None:
        return site.attend(a.to(F64))
    return project(a, site, "q"), project(a, site, "k"), project(a, site, "v")


@dataclass
class Run:
    family: str
    case: Case
    model: Any
    adapter: Adapter
    batch: Batch
    sites: list[Site]
    cap: Capture
    ref: Reference
    left: tuple[int, bool]  # after the capture: hooks left on the model, switches as they were


PARAMS = [
    pytest.param((family, variant), id=f"{family}-{variant}")
    for family in FAMILIES
    for variant in (CASES.get(family) or {"missing": None})
]


def switches(model: Any) -> list[tuple[int, Any]]:
    """timm fused-attention flags and the HF attention implementation: capture must restore them."""
    flags = [
        (id(m), m.fused_attn) for m in model.modules() if isinstance(getattr(m, "fused_attn", None), bool)
    ]
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return flags + ([(0, impl)] if impl is not None else [])


@pytest.fixture(scope="module", params=PARAMS)
def run(request: pytest.FixtureRequest, hook_count: Callable[[nn.Module], int]) -> Run:
    family, variant = request.param
    case = CASES.get(family, {}).get(variant)
    if case is None:
        pytest.fail(
            f"adapter family {family!r} has no conformance case:"
            " add one to CASES in tests/families.py or a tests/cases_*.py module"
        )
    model, batch = case.build(), case.batch()
    adapter, sites, before = adapter_for(model), case.sites(model), switches(model)
    cap = capture(adapter, batch)  # first, on a model no reference forward has touched
    left = (hook_count(model), switches(model) == before)
    # the generic path's reading as its proof on the first batch leaves it (generic_verify): a reading it
    # proves in place of the first try (a parameter's orientation) is the one the analysis uses
    adapter = prove(adapter, batch.inputs, batch.size)[0]
    return Run(family, case, model, adapter, batch, sites, cap, reference(case, model, batch, sites), left)


def close(actual: Tensor, expected: Tensor, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Equal to float32 resolution (float32 activations against float32 or float64 references)."""
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual.to(F64), expected.to(F64), rtol=rtol, atol=atol)


def samples(t: Tensor, batch: Batch) -> list[Tensor]:
    """Per-sample rows without padding (the test's own trimming, from the batch's lengths)."""
    if batch.lengths is None:
        return list(t.unbind(0))
    return [t[b, : int(n)] for b, n in enumerate(batch.lengths.tolist())]


def main_output(out: Any) -> Tensor:
    first = out if isinstance(out, Tensor) else out[0]
    assert isinstance(first, Tensor)
    return first


# ------------------------------------------------------------------------------------------------ tests


def test_every_registered_family_has_a_case() -> None:
    missing = [f for f in FAMILIES if not CASES.get(f)]
    assert not missing, f"families without a conformance case in tests/families.py: {missing}"
    assert set(CASES) <= set(FAMILIES), (
        f"cases for unregistered families: {sorted(set(CASES) - set(FAMILIES))}"
    )


def test_the_registry_gives_the_model_to_its_family(run: Run) -> None:
    first = next(f for f in FAMILIES if importlib.import_module(f"condcli.adapters.{f}").matches(run.model))
    assert first == run.family
    point = run.adapter.embedding
    assert run.model.get_submodule(point.name) is point.module
    assert len(run.adapter.layers) == len(run.sites)
    for spec, site in zip(run.adapter.layers, run.sites, strict=True):
        block = run.model.get_submodule(spec.name.split("#")[0])  # a shared block's k-th call: 'name#callK'
        assert any(m is site.attn for m in block.modules()), spec.name
        assert spec.heads == site.heads == spec.weights().heads, spec.name
        assert (spec.probs is not None) == run.case.observable, spec.name


def test_capture_leaves_no_hooks_and_restores_the_switches(run: Run) -> None:
    assert run.left == (0, True)


def test_x_is_the_library_own_tensor(run: Run) -> None:
    assert run.cap.x.shape == run.ref.x.shape
    for got, want in zip(run.cap.samples(), samples(run.ref.x, run.batch), strict=True):
        close(got, want, rtol=1e-6, atol=1e-6)


def test_x_l_and_a_l_match_the_model(run: Run) -> None:
    assert sorted(run.cap.layers) == list(range(len(run.sites)))
    for i, (xl, al) in enumerate(zip(run.ref.x_layers, run.ref.a_layers, strict=True)):
        layer = run.cap.layers[i]
        assert layer.x_in is not None and layer.attn_in is not None
        assert layer.x_in.shape == xl.shape, f"layer {i}"
        for got, want in zip(samples(layer.x_in, run.batch), samples(xl, run.batch), strict=True):
            close(got, want)
        close(layer.attn_in, al)


def test_probs_match_the_model_or_are_declared_unobservable(run: Run) -> None:
    for i, spec in enumerate(run.adapter.layers):
        got, want = run.cap.layers[i].probs, run.ref.probs[i]
        if not run.case.observable:
            assert spec.probs is None and got is None and want is None, spec.name
            continue
        assert got is not None and want is not None, spec.name
        close(got, want)
        # informative: P is far from uniform, so a wrong P would not pass
        assert float((want - want.mean(-1, keepdim=True)).abs().max()) > 1e-3, spec.name


def test_p_times_v_is_what_the_output_projection_received(run: Run) -> None:
    for i, (spec, site) in enumerate(zip(run.adapter.layers, run.sites, strict=True)):
        layer = run.cap.layers[i]
        if spec.probs is None:  # nothing to multiply: the family says P is not observable
            assert not run.case.observable and layer.probs is None, spec.name
            continue
        assert layer.probs is not None and layer.attn_in is not None
        w = spec.weights()
        # V = A_l W_V + b_V per query head (the KV head it reads, under grouped-query attention)
        v = torch.einsum("bgnc,hcd->bghnd", layer.attn_in.to(F64), w.per_query("v"))
        if w.bv is not None:
            v = v + w.bv[w.kv_index()][:, None, :]
        if site.attend is not None:  # V from other tokens than A_l's (spatial reduction, pooling)
            v = site.attend(layer.attn_in.to(F64))[2]
        p = layer.probs.to(F64) if site.post is None else site.post(layer.probs.to(F64))
        o = p @ v if site.mixing == "tokens" else (p @ v.transpose(-1, -2)).transpose(-1, -2)
        merged = o.transpose(2, 3).flatten(-2) if site.merge is None else site.merge(o)
        close(merged, run.ref.pv[i])  # (B, G, n, H·d_h), heads side by side


def test_w_slices_are_the_module_weights(run: Run) -> None:
    for spec, site in zip(run.adapter.layers, run.sites, strict=True):
        w = spec.weights()
        for role, bias in zip("qkv", (w.bq, w.bk, w.bv), strict=True):
            weight, expected_bias = site.w[role]
            full = w.full(role)  # type: ignore[arg-type]
            assert full.dtype == F64 and full.shape == weight.shape, (spec.name, role)
            assert torch.equal(full, weight.detach().to(F64)), (spec.name, role)
            assert (bias is None) == (expected_bias is None), (spec.name, role)
            if bias is not None:
                assert expected_bias is not None
                heads = site.role_heads(role)
                assert bias.shape == (heads, weight.shape[1] // heads)
                assert torch.equal(bias.reshape(-1), expected_bias.detach().to(F64)), (spec.name, role)
        # the per-head slices are what the family projects with: q_h = A_l W_Q[h] + b_Q[h]
        a = run.cap.layers[spec.index].attn_in
        assert a is not None
        q = torch.einsum("bgnc,hcd->bghnd", a.to(F64), w.wq)
        close(q + (0 if w.bq is None else w.bq[:, None, :]), project(a, site, "q"))
        # and each query head reads the K/V slice of its own KV head (grouped-query attention,
        # docs/math.md#layers)
        for role, bias in (("k", w.bk), ("v", w.bv)):
            y = torch.einsum("bgnc,hcd->bghnd", a.to(F64), w.per_query(role))  # type: ignore[arg-type]
            close(y + (0 if bias is None else bias[w.kv_index()][:, None, :]), project(a, site, role))


@pytest.mark.parametrize("where", ["sink", "module"])
def test_no_hooks_left_and_output_unchanged_after_a_forward_that_raised(
    run: Run, where: str, hook_count: Callable[[nn.Module], int]
) -> None:
    model = run.case.build()  # fresh: no reference forward has put library hooks on it
    adapter, sites, before_switches = adapter_for(model), run.case.sites(model), switches(model)
    assert hook_count(model) == 0
    with torch.no_grad():
        before = main_output(adapter.run(run.batch.inputs))

    def fail(*_: Any) -> None:
        raise RuntimeError(f"failure in the {where}")

    with pytest.raises(RuntimeError, match=f"failure in the {where}"):
        if where == "sink":  # X_l and A_l always fire, so the sink gets the first layer and raises
            capture(adapter, run.batch, probes=("x_in", "attn_in"), sink=fail)
        else:  # a module the probes hook raises halfway through the forward
            handle = sites[-1].attn.register_forward_pre_hook(fail)
            try:
                capture(adapter, run.batch)
            finally:
                handle.remove()
    assert hook_count(model) == 0
    assert switches(model) == before_switches
    with torch.no_grad():
        after = main_output(adapter.run(run.batch.inputs))
    assert torch.equal(before, after)


def test_an_early_stop_captures_what_the_whole_forward_does(
    run: Run, hook_count: Callable[[nn.Module], int]
) -> None:
    """The forward stops once every asked-for layer is captured: for the first layer, the middle one and
    all of them, every tensor is bitwise the one of running the model to its end, and nothing is left on the
    model (hooks, switches, the output of a forward after it)."""
    model = run.case.build()
    adapter, before_switches = adapter_for(model), switches(model)
    with torch.no_grad():
        before = main_output(adapter.run(run.batch.inputs))
    count = len(adapter.layers)
    for layers in ([0], [count // 2], None):
        early = capture(adapter, run.batch, layers=layers)
        whole = capture(adapter, run.batch, layers=layers, to_end=True)
        assert early.output is None and whole.output is not None
        assert_same_capture(early, whole)
    assert hook_count(model) == 0
    assert switches(model) == before_switches
    with torch.no_grad():
        assert torch.equal(main_output(adapter.run(run.batch.inputs)), before)
