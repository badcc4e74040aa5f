"""--adapter FILE.toml: a declared adapter builds the same structure as the family or generic adapter.

Each model is captured through both adapters (the tensors must be identical) and checked against the model
itself: X, X_l, A_l read by the test's own hooks or recomputed by hand in float64, P recomputed from the
module weights, and W_V checked through the attention's own output (P·A_l·W_V). Every invalid file is one
line, exit 2, naming the key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import Result
from torch import nn

from condcli.adapters import adapter_for
from condcli.adapters.base import Adapter
from condcli.capture import Capture, capture
from condcli.errors import InputError
from condcli.inputs.batches import Batch
from tests.helpers import np_kappa
from tests.recording import hooks
from tests.toy_models import ToyModel

TOY: dict[str, Any] = {
    "embedding": {"module": "embed", "x": "output", "position_encoded": False},
    "blocks": {"path": "layers"},
    "attention": {
        "module": "attn",
        "heads": 4,
        "projections": {"q": "q", "k": "k", "v": "v"},
        "probs": {"source": "module", "module": "softmax"},
    },
}
VIT: dict[str, Any] = {
    "embedding": {"module": "pos_drop", "x": "output"},
    "blocks": {"path": "blocks.*"},
    "attention": {
        "module": "attn",
        "heads": 2,
        "projections": {"fused": "qkv", "order": "qkv", "layout": "stacked"},
        "probs": {"source": "module", "module": "attn_drop"},
    },
}


def toml(data: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer: scalars and lists of strings first, then each table under its header."""
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines += ["", f"[{prefix}{k}]", toml(v, f"{prefix}{k}.")]
    return "\n".join(lines)


def declare(tmp_path: Path, data: dict[str, Any], name: str = "adapter.toml") -> Path:
    path = tmp_path / name
    path.write_text(toml(data) + "\n", encoding="utf-8")
    return path


def both(model: nn.Module, declared: Adapter, batch: Batch) -> tuple[Capture, Capture]:
    """What the declared and the family/generic adapter capture on one batch (identical: asserted)."""
    mine, theirs = capture(declared, batch), capture(adapter_for(model), batch)
    assert torch.equal(mine.x, theirs.x)
    assert mine.layers.keys() == theirs.layers.keys()
    for i, layer in mine.layers.items():
        for probe in ("x_in", "attn_in", "probs"):
            got, want = getattr(layer, probe), getattr(theirs.layers[i], probe)
            assert got is not None and torch.equal(got, want), (i, probe)
        w, ref = declared.layers[i].weights(), adapter_for(model).layers[i].weights()
        for part in ("wq", "wk", "wv", "bq", "bk", "bv"):
            torch.testing.assert_close(getattr(w, part), getattr(ref, part), rtol=0, atol=0)
    return mine, theirs


def test_toy_declared_equals_generic_and_a_float64_recomputation(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ToyModel(d=16, heads=4, depth=2).double().eval()
    declared = adapter_for(model, declare(tmp_path, TOY))
    assert declared.family == "declared" and f"adapter declared in {tmp_path}" in declared.notes[0]
    assert not declared.embedding.after_position_encoding and declared.input_kind == "images"
    pixels = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    got, _ = both(model, declared, Batch({"pixel_values": pixels}, None, ["a", "b"]))
    # the toy's forward written out by hand, in float64, from its weights
    patches = pixels.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(2, -1, 192)
    x = patches @ model.embed.weight.T + model.embed.bias
    torch.testing.assert_close(got.x, x, rtol=1e-12, atol=1e-12)
    for i, block in enumerate(model.layers):
        a = nn.functional.layer_norm(x, (16,), block.norm.weight, block.norm.bias, block.norm.eps)
        at = block.attn
        q, k, v = ((a @ m.weight.T + m.bias).reshape(2, 16, 4, 4).transpose(1, 2) for m in (at.q, at.k, at.v))
        p = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
        layer = got.layers[i]
        torch.testing.assert_close(layer.x_in, x, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(layer.attn_in, a[:, None], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(layer.probs, p[:, None], rtol=1e-12, atol=1e-12)
        w = declared.layers[i].weights()
        for h in range(4):  # head h: columns h·d_h … of the module's right-multiplying matrices
            cols = slice(4 * h, 4 * h + 4)
            for mine, lin in ((w.wq, at.q), (w.wk, at.k), (w.wv, at.v)):
                torch.testing.assert_close(mine[h], lin.weight.T[:, cols], rtol=0, atol=0)
        x = x + (p @ v).transpose(1, 2).reshape(2, 16, 16)


def test_timm_vit_fused_qkv_and_a_block_pattern_equal_the_timm_family(tmp_path: Path) -> None:
    import timm

    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=2,
    ).eval()
    declared = adapter_for(model, declare(tmp_path, VIT))
    assert [s.name for s in declared.layers] == ["blocks.0", "blocks.1"]
    assert adapter_for(model).family == "timm-vit"
    pixels = torch.randn(2, 3, 32, 32)
    got, _ = both(model, declared, Batch({"pixel_values": pixels}, None, ["a", "b"]))
    where = {"x": (model.pos_drop, False)}
    where |= {f"x{i}": (b, True) for i, b in enumerate(model.blocks)}
    where |= {f"a{i}": (b.attn, True) for i, b in enumerate(model.blocks)}
    for block in model.blocks:  # the eager path capture runs (fused attention rounds differently)
        block.attn.fused_attn = False
    with hooks(model, where) as seen, torch.no_grad():
        model(pixels)
    torch.testing.assert_close(got.x, seen["x"][0], rtol=0, atol=0)
    for i, block in enumerate(model.blocks):
        layer, a = got.layers[i], seen[f"a{i}"][0]
        torch.testing.assert_close(layer.x_in, seen[f"x{i}"][0], rtol=0, atol=0)
        torch.testing.assert_close(layer.attn_in, a[:, None], rtol=0, atol=0)
        # P from the module's own fused weight, reshaped as timm does: (B, N, 3, H, d_h)
        qkv = (a.double() @ block.attn.qkv.weight.double().T + block.attn.qkv.bias.double()).reshape(
            2, 17, 3, 2, 16
        )
        q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
        p = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1)
        assert layer.probs is not None
        torch.testing.assert_close(layer.probs[:, 0].double(), p, rtol=1e-5, atol=1e-6)


class FusedAttention(nn.Module):
    """One fused projection holding ``order`` (stacked or each head's parts side by side), a functional
    softmax, and V = A_l itself where ``order`` has no v (no value projection: W_V is the identity)."""

    def __init__(self, d: int, heads: int, order: str, layout: str) -> None:
        super().__init__()
        self.heads, self.order, self.layout = heads, order, layout
        self.mix = nn.Linear(d, len(order) * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, d = x.shape
        h, n = self.heads, len(self.order)
        y = self.mix(x)
        if self.layout == "per_head":
            parts = y.reshape(B, N, h, n, d // h).unbind(3)
        else:
            parts = tuple(c.reshape(B, N, h, d // h) for c in y.chunk(n, dim=-1))
        got = {c: t.transpose(1, 2) for c, t in zip(self.order, parts, strict=True)}
        v = got.get("v", x.reshape(B, N, h, d // h).transpose(1, 2))
        p = (got["q"] @ got["k"].transpose(-1, -2) / math.sqrt(d // h)).softmax(dim=-1)
        return (p @ v).transpose(1, 2).reshape(B, N, d)


class FusedBlock(nn.Module):
    def __init__(self, d: int, heads: int, order: str, layout: str) -> None:
        super().__init__()
        self.norm, self.attn = nn.LayerNorm(d), FusedAttention(d, heads, order, layout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.norm(x))


class FusedModel(nn.Module):
    def __init__(self, order: str, layout: str, d: int = 12, heads: int = 3) -> None:
        super().__init__()
        self.embed = nn.Linear(5, d)
        self.stages = nn.ModuleDict(
            {"a": FusedBlock(d, heads, order, layout), "b": FusedBlock(d, heads, order, layout)}
        )

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.stages["b"](self.stages["a"](self.embed(pixel_values)))


@pytest.mark.parametrize(
    ("order", "layout"),
    [("qkv", "stacked"), ("kvq", "stacked"), ("vqk", "per_head"), ("kq", "stacked"), ("qk", "per_head")],
)
def test_fused_orders_layouts_and_identity_wv_reproduce_the_attention_output(
    tmp_path: Path, order: str, layout: str
) -> None:
    torch.manual_seed(0)
    model = FusedModel(order, layout).double().eval()
    projections: dict[str, Any] = {"fused": "mix", "order": order, "layout": layout}
    if "v" not in order:
        projections["v"] = "identity"
    data = {
        "embedding": {"module": "stages.a", "x": "input"},
        "blocks": {"path": ["stages.a", "stages.b"]},
        "attention": {"module": "attn", "heads": 3, "projections": projections, "probs": {"source": "tap"}},
    }
    declared = adapter_for(model, declare(tmp_path, data))
    assert declared.embedding.at_input and ("identity" in declared.notes[1]) == ("v" not in order)
    pixels = torch.randn(2, 7, 5, dtype=torch.float64)
    got = capture(declared, Batch({"pixel_values": pixels}, None, ["a", "b"]))
    where = {f"o{i}": (b.attn, False) for i, b in enumerate(model.stages.values())}
    with hooks(model, where) as seen, torch.no_grad():
        model(pixels)
    torch.testing.assert_close(got.x, model.embed(pixels), rtol=0, atol=0)
    for i in range(2):
        layer, w = got.layers[i], declared.layers[i].weights()
        assert layer.attn_in is not None and layer.probs is not None
        a = layer.attn_in[:, 0]
        q = torch.einsum("bnd,hde->bhne", a, w.wq) + w.bq[None, :, None]  # type: ignore[index]
        k = torch.einsum("bnd,hde->bhne", a, w.wk) + w.bk[None, :, None]  # type: ignore[index]
        p = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
        torch.testing.assert_close(layer.probs[:, 0], p, rtol=1e-12, atol=1e-12)
        v = torch.einsum("bnd,hde->bhne", a, w.wv) + (0 if w.bv is None else w.bv[None, :, None])
        out = (layer.probs[:, 0] @ v).transpose(1, 2).reshape(2, 7, 12)
        torch.testing.assert_close(out, seen[f"o{i}"][0], rtol=1e-12, atol=1e-12)
        if "v" not in order:
            assert w.bv is None and torch.equal(w.full("v"), torch.eye(12, dtype=torch.float64))


def test_returned_weights_of_a_hugging_face_attention_equal_output_attentions(tmp_path: Path) -> None:
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    model = DistilBertModel(
        DistilBertConfig(vocab_size=50, dim=32, n_layers=2, n_heads=4, hidden_dim=64)
    ).eval()
    data = {
        "input": "text",
        "embedding": {"module": "embeddings", "x": "output"},
        "blocks": {"path": "transformer.layer"},
        "attention": {
            "module": "attention",
            "heads": 4,
            "projections": {"q": "q_lin", "k": "k_lin", "v": "v_lin"},
            "probs": {"source": "returned"},
        },
    }
    declared = adapter_for(model, declare(tmp_path, data))
    ids = torch.randint(0, 50, (2, 9))
    batch = Batch({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, None, ["a", "b"])
    got, _ = both(model, declared, batch)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True, output_hidden_states=True)
    torch.testing.assert_close(got.x, out.hidden_states[0], rtol=0, atol=0)
    for i in (0, 1):
        torch.testing.assert_close(got.layers[i].probs, out.attentions[i].unsqueeze(1))


def test_spectrum_through_the_cli_with_a_declared_adapter_equals_numpy(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    file = declare(tmp_path, TOY)
    spec = "tests.toy_models:toy_factory"
    result = cli(
        "spectrum", spec, "--adapter", str(file), "--max-samples", "2", "--dtype", "float64", "--json"
    )
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["model"]["family"] == "declared" and f"adapter declared in {file}" in r["notes"]
    torch.manual_seed(0)
    from tests.toy_models import toy_factory

    ref = toy_factory().double().eval()
    from condcli.inputs.batches import InputSpec, stream
    from condcli.loading.sources import LoadOptions, load

    loaded = load(spec, LoadOptions(device="cpu", adapter=file))
    pixels = next(iter(stream(loaded.preprocessing, InputSpec(max_samples=2, batch_size=2)))).inputs[
        "pixel_values"
    ]
    where = {"x": (ref.embed, False)} | {f"x{i}": (b, True) for i, b in enumerate(ref.layers)}
    with hooks(ref, where) as seen, torch.no_grad():
        ref(pixels.double())
    np.testing.assert_allclose(
        r["embedding"]["kappa"]["per_sample"], np_kappa(seen["x"][0].numpy()), rtol=1e-9
    )
    for i, layer in enumerate(r["layers"]):
        np.testing.assert_allclose(
            layer["kappa"]["per_sample"], np_kappa(seen[f"x{i}"][0].numpy()), rtol=1e-9
        )


def changed(base: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """``base`` with the dotted ``key`` set to ``value`` (None: removed)."""
    out = json.loads(json.dumps(base))
    *path, last = key.split(".")
    table = out
    for part in path:
        table = table[part]
    if value is None:
        table.pop(last, None)
    else:
        table[last] = value
    return out


BAD = [  # (key changed, its new value (None: removed), the key the error names)
    ("input", "audio", "input"),
    ("inputs", "images", "inputs"),
    ("embedding.modul", "embed", "embedding.modul"),
    ("embedding.x", None, "embedding.x"),
    ("embedding.x", "middle", "embedding.x"),
    ("embedding.module", "embd", "embedding.module"),
    ("embedding.position_encoded", "no", "embedding.position_encoded"),
    ("blocks", None, "blocks"),
    ("blocks.path", "layer", "blocks.path"),
    ("blocks.path", "embed", "blocks.path"),
    ("blocks.path", "nothing.*", "blocks.path"),
    ("blocks.path", 3, "blocks.path"),
    ("attention.module", "atn", "attention.module"),
    ("attention.heads", 0, "attention.heads"),
    ("attention.heads", "4", "attention.heads"),
    ("attention.heads", 3, "attention.heads"),
    ("attention.kv_heads", 3, "attention.kv_heads"),
    ("attention.causal", "yes", "attention.causal"),
    ("attention.projections.q", "qq", "attention.projections.q"),
    ("attention.projections.v", None, "attention.projections.v"),
    ("attention.projections.order", "qkv", "attention.projections.order"),
    ("attention.projections.fused", "softmax", "attention.projections.q"),
    ("attention.projections.v", "softmax", "attention.projections.v"),
    ("attention.probs.source", "maybe", "attention.probs.source"),
    ("attention.probs.module", None, "attention.probs.module"),
    ("attention.probs.module", "soft", "attention.probs.module"),
]
FUSED_BAD = [
    ("attention.projections.order", "qq", "attention.projections.order"),
    ("attention.projections.order", "qk", "attention.projections.v"),
    ("attention.projections.layout", "diagonal", "attention.projections.layout"),
    ("attention.projections.fused", "norm", "attention.projections.fused"),
    ("attention.projections.fused", "q_norm", "attention.projections.fused"),
    ("attention.heads", 5, "attention.heads"),
]


@pytest.mark.parametrize(("key", "value", "named"), BAD)
def test_an_invalid_file_is_one_line_exit_2_naming_the_key(
    tmp_path: Path, cli: Callable[..., Result], key: str, value: Any, named: str
) -> None:
    file = declare(tmp_path, changed(TOY, key, value))
    result = cli("spectrum", "tests.toy_models:toy_factory", "--adapter", str(file), "--max-samples", "1")
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert f"{file}: {named} " in result.stderr, result.stderr


@pytest.mark.parametrize(("key", "value", "named"), FUSED_BAD)
def test_an_invalid_fused_projection_names_the_key(tmp_path: Path, key: str, value: Any, named: str) -> None:
    import timm

    model = timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        img_size=32,
        patch_size=16,
        embed_dim=16,
        depth=1,
        num_heads=2,
    )
    with pytest.raises(InputError) as e:
        adapter_for(model, declare(tmp_path, changed(VIT, key, value)))
    assert f": {named} " in e.value.line()


def test_a_misspelt_path_suggests_the_model_s_own_and_bad_toml_is_one_line(
    tmp_path: Path, cli: Callable[..., Result]
) -> None:
    file = declare(tmp_path, changed(TOY, "attention.module", "atn"))
    with pytest.raises(InputError, match="has no module at that path") as e:
        adapter_for(ToyModel(), file)
    assert (e.value.hint or "").startswith("did you mean 'attn'")
    broken = tmp_path / "broken.toml"
    broken.write_text("[embedding\nmodule = 1\n", encoding="utf-8")
    result = cli("spectrum", "tests.toy_models:toy_factory", "--adapter", str(broken))
    assert result.exit_code == 2 and "invalid TOML" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    missing = cli("spectrum", "tests.toy_models:toy_factory", "--adapter", str(tmp_path / "none.toml"))
    assert missing.exit_code == 2 and "--adapter" in missing.stderr and "no such file" in missing.stderr
