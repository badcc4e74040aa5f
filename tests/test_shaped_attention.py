"""Shaped attention on the blog's simplified ViT (examples/simplified_vit.py, declared by
examples/simplified_vit.toml): κ(P) and κ(M), M = αI + βP, per layer and head against float64 NumPy on the
test's own hooks of the softmax and its own α, β (distinct per head, from a checkpoint the test writes);
μ(A) = κ(M)κ(A_l)κ(W_V) with κ(W_V) = 1 for the identity; rank-decay on P; check; and κ(M) null where a
model mixes with P itself."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result
from safetensors.torch import save_file
from torch import nn

from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import np_cumulative, np_kappa
from tests.recording import hooks

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = f"{EXAMPLES / 'simplified_vit.py'}:build"
TOML = str(EXAMPLES / "simplified_vit.toml")
FAST = ["--max-samples", "2", "--batch-size", "2", "--dtype", "float64"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, Path]:
    """The blog model with α, β drawn per layer and head, and the checkpoint holding its weights."""
    torch.manual_seed(7)
    ref = runpy.run_path(str(EXAMPLES / "simplified_vit.py"))["build"]()
    with torch.no_grad():
        for block in ref.blocks:
            block.attn.alpha.uniform_(0.05, 1.0)
            block.attn.beta.uniform_(0.0, 1.5)
    path = tmp_path_factory.mktemp("blog") / "blog.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    return ref.double().eval(), path


def _seen(ref: nn.Module, path: Path) -> dict[str, list[torch.Tensor]]:
    """The test's own hooks on the inputs condcli reads: A_l (the attention's input) and P (the softmax)."""
    loaded = load(SPEC, LoadOptions(device="cpu", adapter=Path(TOML), checkpoint=path))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    where = {f"a{i}": (b.attn, True) for i, b in enumerate(ref.blocks)}
    where |= {f"p{i}": (b.attn.softmax, False) for i, b in enumerate(ref.blocks)}
    with hooks(ref, where) as seen, torch.no_grad():
        ref(batch.inputs["pixel_values"].double())
    return seen


def test_kappa_of_p_and_of_the_mixing_matrix_match_numpy(
    reference: tuple[nn.Module, Path], cli_json: Callable[..., dict[str, Any]]
) -> None:
    ref, path = reference
    args = ["--adapter", TOML, "--checkpoint", str(path), "--heads", *FAST]
    r = cli_json("spectrum", SPEC, *args)
    seen = _seen(ref, path)
    assert any("mixing_matrix(P)" in note for note in r["notes"])
    assert any("W_V is the identity" in note for note in r["notes"])  # why κ(W_V) = 1
    for i, (layer, block) in enumerate(zip(r["layers"], ref.blocks, strict=True)):
        p = seen[f"p{i}"][0].numpy()  # (S, H, N, N)
        alpha = block.attn.alpha.detach().numpy()[None, :, None, None]
        beta = block.attn.beta.detach().numpy()[None, :, None, None]
        m = alpha * np.eye(p.shape[-1]) + beta * p  # the blog's αI + βP, per head
        kp, km, ka = np_kappa(p), np_kappa(m), np_kappa(seen[f"a{i}"][0].numpy())  # (S, H), (S, H), (S,)
        assert np.all(km < kp / 10)  # the identity term lifts P's small singular values
        assert layer["kappa_wv"] == 1.0 and layer["kappa_wv_heads"] == [1.0] * 4
        assert layer["below_precision"]["mixing"] == 0  # M, not the near-singular P, qualifies μ(A)
        np.testing.assert_allclose(layer["kappa_probs"]["per_sample"], kp.max(1), rtol=1e-7)
        np.testing.assert_allclose(layer["kappa_mixing"]["per_sample"], km.max(1), rtol=1e-9)
        np.testing.assert_allclose(layer["mu_a"]["per_sample"], (km * ka[:, None]).max(1), rtol=1e-9)
        for h, head in enumerate(layer["heads_detail"]):
            np.testing.assert_allclose(head["kappa_probs"]["per_sample"], kp[:, h], rtol=1e-7)
            np.testing.assert_allclose(head["kappa_mixing"]["per_sample"], km[:, h], rtol=1e-9)
            np.testing.assert_allclose(head["mu_a"]["per_sample"], km[:, h] * ka, rtol=1e-9)


def test_rank_decay_is_of_p_and_check_gates(
    reference: tuple[nn.Module, Path], cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    ref, path = reference
    run = [SPEC, "--adapter", TOML, "--checkpoint", str(path), *FAST]
    r = cli_json("rank-decay", *run)
    seen = _seen(ref, path)
    for i, layer in enumerate(r["rank_decay"]["layers"]):
        c = np_cumulative(seen[f"p{i}"][0].numpy()).reshape(-1, 16)
        np.testing.assert_allclose(layer["cumulative"]["median"], np.median(c, 0), rtol=1e-10)
    worst = max(float(np_kappa(seen[f"a{i}"][0].numpy()).max()) for i in range(len(ref.blocks)))
    gate = [*run, "--statistic", "max", "--max-kappa", "1e30"]
    assert cli("check", *gate, "--max-kappa-layer", f"{worst * 1.000001}").exit_code == 0
    assert cli("check", *gate, "--max-kappa-layer", f"{worst * 0.999999}").exit_code == 1


def _layer_header(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return next(line for line in result.stdout.splitlines() if "κ(X_l)" in line and "layer" in line)


def test_a_model_that_mixes_with_p_has_no_kappa_mixing(
    cli: Callable[..., Result], cli_json: Callable[..., dict[str, Any]]
) -> None:
    qk = [f"{EXAMPLES / 'qk_vit.py'}:build", "--adapter", str(EXAMPLES / "qk_vit.toml"), *FAST]
    r = cli_json("spectrum", *qk, "--heads")
    for layer in r["layers"]:
        assert layer["kappa_probs"] is not None and layer["kappa_mixing"] is None
        assert layer["below_precision"]["mixing"] is None
        assert all(h["kappa_mixing"] is None for h in layer["heads_detail"])
    assert "κ(P)" in _layer_header(cli("spectrum", *qk)) and "κ(M)" not in _layer_header(cli("spectrum", *qk))
    assert "κ(M)" in _layer_header(cli("spectrum", SPEC, "--adapter", TOML, *FAST))


def test_readme_blog_table_is_a_fresh_run(cli_json: Callable[..., dict[str, Any]]) -> None:
    """The README's κ(P) / κ(αI + βP) table at the blog's size is what the command it quotes prints now."""
    import re

    from condcli.cli.tables import stat
    from condcli.spectra import aggregate
    from tests.claims import same_at_claimed_precision

    def shown(agg: dict[str, Any]) -> str:  # as the table prints a median: "≥ 1.7e+07" where only a floor
        per = [float(v) for v in agg["per_sample"]]
        rel = (agg.get("rel_uncertainty") or {}).get("per_sample")
        a = aggregate(per, agg.get("per_sample_floor"), None if rel is None else [float(r) for r in rel])
        return stat(a, "median").removesuffix(" ⚠")

    readme = (EXAMPLES.parent / "docs" / "guides" / "your-own-model.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| (\d) \| ((?:≥ )?\S+)(?: ⚠)? \| (\S+) \| (\S+) \| (\S+) \| (\S+) \|$", readme, re.M
    )
    assert len(rows) == 5, rows
    sizes = ["--model-arg", "patch=4", "--model-arg", "dim=96", "--model-arg", "depth=8"]
    report = cli_json("spectrum", SPEC, "--adapter", TOML, *sizes, "--no-conditioned")
    keys = ("kappa_probs", "kappa_mixing", "kappa_attn_input", "mu_a", "attention_entropy")
    for index, *quoted in rows:
        layer = report["layers"][int(index)]
        now = [shown(layer[k]) for k in keys]
        assert all(same_at_claimed_precision(a, b) for a, b in zip(now, quoted, strict=True)), (index, now)
