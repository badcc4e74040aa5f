"""The README's declared-adapter example (examples/qk_vit.py with examples/qk_vit.toml) runs as written: the
generic path cannot read the model, the declared adapter can, and its numbers match float64 NumPy on the
test's own hooks of a reference built from the same file (W_V the identity: κ = 1)."""

from __future__ import annotations

import json
import runpy
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from click.testing import Result

from condcli.inputs.batches import InputSpec, stream
from condcli.loading.sources import LoadOptions, load
from tests.helpers import DTYPE_EPS, np_kappa, np_reported_kappa
from tests.recording import hooks

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = f"{EXAMPLES / 'qk_vit.py'}:build"
TOML = EXAMPLES / "qk_vit.toml"


def test_the_example_needs_its_adapter_and_matches_numpy(cli: Callable[..., Result]) -> None:
    plain = cli("spectrum", SPEC, "--max-samples", "2")
    assert plain.exit_code == 2 and "found no stack of blocks" in plain.stderr
    assert "a TOML file passed as --adapter" in plain.stderr and len(plain.stderr.strip().splitlines()) == 1
    args = ["--adapter", str(TOML), "--max-samples", "2", "--dtype", "float64", "--json"]
    result = cli("spectrum", SPEC, *args)
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["model"]["family"] == "declared" and f"adapter declared in {TOML}" in r["notes"]
    torch.manual_seed(0)  # condcli seeds the factory with --seed (0)
    ref = runpy.run_path(str(EXAMPLES / "qk_vit.py"))["build"]().double().eval()
    loaded = load(SPEC, LoadOptions(device="cpu", adapter=TOML))
    batch = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2))))
    where = {f"x{i}": (b, True) for i, b in enumerate(ref.blocks)}
    where |= {f"p{i}": (b.attn, True) for i, b in enumerate(ref.blocks)}
    with hooks(ref, where) as seen, torch.no_grad():
        ref(batch.inputs["pixel_values"].double())
    x0 = seen["x0"][0].numpy()
    f64 = DTYPE_EPS["float64"]  # the run is --dtype float64: κ below its resolution is the floor σ_1/tol
    np.testing.assert_allclose(r["embedding"]["kappa"]["per_sample"], np_reported_kappa(x0, f64), rtol=1e-9)
    for i, layer in enumerate(r["layers"]):
        block = ref.blocks[i]
        np.testing.assert_allclose(
            layer["kappa"]["per_sample"], np_reported_kappa(seen[f"x{i}"][0].numpy(), f64), rtol=1e-9
        )
        a = seen[f"p{i}"][0].numpy()  # A_l: the attention's input
        got = [float(v) for v in layer["kappa_attn_input"]["per_sample"]]  # LayerNorm's rank d − 1: a floor
        np.testing.assert_allclose(got, np_reported_kappa(a, f64), rtol=1e-9)
        assert layer["kappa_wv"] == 1.0 and layer["kappa_wv_heads"] == [1.0] * 4
        w = block.attn.qk.weight.detach().numpy()  # [Q | K] rows: W_Q is the first d rows, transposed
        np.testing.assert_allclose(layer["kappa_wq"], np_kappa(w[:48].T), rtol=1e-9)
        np.testing.assert_allclose(layer["kappa_wk"], np_kappa(w[48:].T), rtol=1e-9)


def test_the_readme_shows_the_example_file_as_it_is() -> None:
    readme = (EXAMPLES.parent / "docs" / "guides" / "your-own-model.md").read_text(encoding="utf-8")
    assert f"```toml\n{TOML.read_text(encoding='utf-8')}```" in readme
    assert "condcli spectrum examples/qk_vit.py:build --adapter examples/qk_vit.toml\n" in readme
