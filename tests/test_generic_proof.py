"""The generic path proves its Q/K/V reading on the model's first batch, or says it cannot (issue 29).

Every conformance case of the generic path comes out ``generic (verified)``, or honestly unverified where
q, k or v come from other tokens than A_l's; a reading the model contradicts (a fused projection split the
wrong way: the old [Q | K | V] guess on CodeGen, Persimmon and GPTBigCode, a toy that splits [K | Q | V]) is
refused, never reported; the JSON says per layer how Q/K/V were found and the table marks unverified layers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import Result

from condcli.adapters import adapter_for
from condcli.adapters.generic import heads as gh
from condcli.adapters.generic.match import matches, probs_match, tolerance
from condcli.adapters.generic.verify import prove
from condcli.analysis.proof import prove_first_batch
from condcli.errors import InputError
from condcli.inputs.batches import Batch
from tests.conformance_cases import CASES
from tests.families import images
from tests.toy_readings import parameters_linear, per_head_fused, swapped

GENERIC = CASES["generic"]
# honest: Q, or K and V, come from other tokens than A_l's and not as a subset of them (spatial reduction,
# pooling, max-pooled or global queries), K is normalised over the tokens (factorized attention), or the
# module watched is not the one that runs: not compared
UNVERIFIED = {
    "factorized_no_probs",
    "pvt_v2",
    "twins",
    "mvitv2",
    "hiera",
    "coat",
    "gcvit",
    "bigbird_switches_to_full_inside_forward",  # its attention module is replaced inside the forward
}
FAST = ("--max-samples", "2", "--no-conditioned")


def proven(model: Any, batch: Batch) -> list[tuple[str, str | None]]:
    """(qkv_source, refused) per layer once the reading is proven on ``batch``."""
    adapter, _ = prove(adapter_for(model), batch.inputs, batch.size)
    return [(s.qkv_source, s.refused) for s in adapter.layers]


@pytest.mark.parametrize("variant", sorted(GENERIC))
def test_every_generic_case_is_proven_or_honestly_unverified(variant: str) -> None:
    case = GENERIC[variant]
    got = proven(case.build(), case.batch())
    assert all(refused is None for _, refused in got), got
    sources = {source for source, _ in got}
    if variant in UNVERIFIED:
        assert "generic (unverified)" in sources, got
    else:
        assert sources == {"generic (verified)"}, got


def test_a_family_adapter_is_family_and_not_run_again() -> None:
    case = CASES["timm_vit"][next(iter(CASES["timm_vit"]))]
    model = case.build()
    adapter = adapter_for(model)
    same, notes = prove(adapter, case.batch().inputs, case.batch().size)
    assert same.layers == adapter.layers and not notes
    assert {s.qkv_source for s in adapter.layers} == {"family"}


def without_source_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """FUSED_LAYOUTS as it was before issue 29: no CodeGen, Persimmon or GPTBigCode multi-head rows."""
    known = tuple(r for r in gh.FUSED_LAYOUTS if r[1] not in {"CodeGenAttention", "PersimmonAttention"})
    known = tuple(r for r in known if not (r[1] == "GPTBigCodeAttention" and r[2] is None))
    monkeypatch.setattr(gh, "FUSED_LAYOUTS", known)


def test_the_old_qkv_guess_on_codegen_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its row, CodeGen's sharded [q|v|k] was split [Q | K | V] (κ(W_Q) 229.5 printed for 75.0): no
    reading of its weights is proven, so every layer is refused instead of reported."""
    without_source_rows(monkeypatch)
    case = GENERIC["codegen_sharded_qvk"]
    got = proven(case.build(), case.batch())
    assert all(source == "generic (unverified)" and refused for source, refused in got), got


@pytest.mark.parametrize("variant", ["persimmon_per_head", "gpt_bigcode_multi_head"])
def test_without_its_row_a_per_head_layout_is_found_by_proof_not_assumed(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Persimmon printed κ(W_Q) 3,440 for 116 under the [Q | K | V] guess: now the guess is not proven, the
    per-head reading is, and its weights are the ones the family's own row gives."""
    import torch

    case = GENERIC[variant]
    model, batch = case.build(), case.batch()
    right = [s.weights() for s in adapter_for(model).layers]
    without_source_rows(monkeypatch)
    done, _ = prove(adapter_for(model), batch.inputs, batch.size)
    assert {s.qkv_source for s in done.layers} == {"generic (verified)"}
    for spec, want in zip(done.layers, right, strict=True):
        got = spec.weights()
        assert all(torch.equal(getattr(got, w), getattr(want, w)) for w in ("wq", "wk", "wv"))


def test_a_fused_projection_split_k_q_v_is_refused() -> None:
    model, batch = swapped(), images()
    got = proven(model, batch)
    assert all(refused is not None and "is what it uses as" in refused for _, refused in got), got
    with pytest.raises(InputError, match="could not be proven"):
        prove_first_batch_of(model, batch)


def prove_first_batch_of(model: Any, batch: Batch) -> None:
    from condcli.loading.sources import LoadedModel

    adapter = adapter_for(model)
    loaded = LoadedModel("toy", "local", "random", model, adapter, None, None, None)  # type: ignore[arg-type]
    prove_first_batch(loaded, [batch])


def test_the_cli_refuses_a_permuted_fused_projection_with_one_line(cli: Callable[..., Result]) -> None:
    result = cli("spectrum", "tests.toy_readings:swapped", *FAST)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not be proven" in lines[0] and "--adapter" in lines[0], lines
    assert "Traceback" not in result.output


def test_the_json_says_how_each_layer_was_found(cli: Callable[..., Result]) -> None:
    result = cli("spectrum", "tests.toy_readings:plain", *FAST, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [layer["qkv_source"] for layer in report["layers"]] == ["generic (verified)"] * 2
    assert any("proven on the first batch" in note for note in report["notes"])


def test_the_table_marks_unverified_layers(cli: Callable[..., Result]) -> None:
    result = cli("spectrum", "tests.toy_readings:factorized", *FAST)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "layers.0 ?" in line or "layers.1 ?" in line]
    assert rows, result.stdout
    assert "could not be proven" in result.stdout.replace("\n", " ")
    report = json.loads(cli("spectrum", "tests.toy_readings:factorized", *FAST, "--json").stdout)
    assert {layer["qkv_source"] for layer in report["layers"]} == {"generic (unverified)"}


def test_matching_is_up_to_one_positive_scale_within_the_dtype_tolerance() -> None:
    import torch

    x = torch.randn(2, 1, 4, 5, 8, dtype=torch.float64)
    tol = tolerance(torch.float32)
    assert matches((0.35 * x).float(), x, tol) == "exactly"  # q·d_h^-½ folded in, stored in float32
    assert matches(x.transpose(2, 3).contiguous(), x, tol) == "as rows"  # (B, n, H, d_h): same rows
    assert matches(-x, x, tol) is None  # a negative scale is not the same tensor
    assert matches(x + 1e-2 * torch.randn_like(x), x, tol) is None  # 1% off: not rounding
    # NesT: (B, H, blocks, n, d_h) against (B, 1, H, blocks·n, d_h), ten thousand rows stored in float32,
    # where rounding reorders rows of nearly equal projection: still the same rows
    many = torch.randn(2, 1, 6, 4 * 196, 32, dtype=torch.float64)
    regrouped = many.reshape(2, 6, 4, 196, 32).float()
    assert matches(regrouped, many, tol) == "as rows"
    assert matches(regrouped.roll(1, dims=-1), many, tol) is None  # the channels of each row shifted


@pytest.mark.parametrize("build", [per_head_fused, parameters_linear])
def test_a_reading_the_model_proves_in_place_of_the_first_try_is_used_and_said(build: Any) -> None:
    """A fused projection of no known family laid out per head, parameters multiplied F.linear(x, W): the
    first reading ([Q | K | V], x @ W) is not proven, the alternative is, and it replaces the weights."""
    import torch

    model, batch = build(), images()
    adapter = adapter_for(model)
    done, notes = prove(adapter, batch.inputs, batch.size)
    assert {s.qkv_source for s in done.layers} == {"generic (verified)"}
    assert any("another reading of the same weights" in n for n in notes), notes
    for first, proven_spec in zip(adapter.layers, done.layers, strict=True):
        assert not torch.equal(first.weights().wq, proven_spec.weights().wq)


def test_p_recomputed_from_q_and_k_proves_them_and_a_bias_does_not() -> None:
    """softmax(s·q kᵀ + causal mask) is told from q, k (any s > 0); a bias or q and k swapped is not."""
    import torch

    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(2, 1, 3, 6, 4, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.full((6, 6), float("-inf")).triu(1)
    p = (0.5 * q @ k.transpose(-1, -2) + mask).softmax(-1).float()
    tol = tolerance(torch.float32)
    assert probs_match(p, q, k, tol)
    assert not probs_match(p, k, q, tol)
    biased = (0.5 * q @ k.transpose(-1, -2) + torch.randn(6, 6, generator=g) + mask).softmax(-1)
    assert not probs_match(biased, q, k, tol)


def test_no_layer_chosen_nothing_to_prove(cli: Callable[..., Result]) -> None:
    """--layers none reports X alone, which no Q/K/V reading touches: even a contradicted reading runs."""
    result = cli("spectrum", "tests.toy_readings:swapped", "--layers", "none", *FAST)
    assert result.exit_code == 0, result.output


def test_a_refused_layer_is_a_dash_with_a_note_and_the_others_are_reported(
    cli: Callable[..., Result],
) -> None:
    report = json.loads(cli("spectrum", "tests.toy_readings:mixed", *FAST, "--json").stdout)
    assert [(x["index"], x["qkv_source"]) for x in report["layers"]] == [(0, "generic (verified)")]
    (refused,) = report["layers_refused"]
    assert refused["index"] == 1 and "is what it uses as" in refused["refused"]
    table = cli("spectrum", "tests.toy_readings:mixed", *FAST)
    assert table.exit_code == 0
    assert "— layer 1 layers.1: no numbers" in " ".join(table.stdout.split())
