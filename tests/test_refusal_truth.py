"""Issue 42 (docs/breadth-audit.md, "qkv-unreadable and p-unobservable", "transformers: inputs"): refusals
whose code or sentence was false for the model, each now what its source shows:

- ImageGPT's softmax is an ``nn.Softmax`` built inline (``nn.Softmax(dim=-1)(w)``): its attention was taken
  for a mixer with no softmax, and its Conv1D ``c_attn`` went unread; MaskFormer-Swin's encoder reads the
  weights out of what its stages return only with hidden states: both run, read and proven;
- FSMT's encoder (no config) got nothing through condcli's own wrapper, whose KeyError passed for the model's
  refusal; the model runs, and its sequence-first attention is refused by the first batch's proof;
- YOSO returns its context as its "weights": it computes no softmax, and P is said not to exist;
- PatchTSMixer's gated attention is a softmax feature gate: no attention;
- MLA's latent K/V path is named whole, and why no probe forward ran; weights returned in parts (Pegasus-X)
  and a softmax laid (B·H, blocks, q, k) (HaloNet) are said as what they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

import condcli
from bench.sweep_architectures import build_hf
from condcli.adapters import adapter_for
from condcli.adapters.base import _raised_by_condcli
from condcli.adapters.generic.diagnose import Seen, _between, refusal
from condcli.adapters.generic.probs import returned_probs
from condcli.adapters.softmax_tap import computes_softmax, tapped_probs
from condcli.cli.main import main
from condcli.reports.refusal import Refused


def spectrum(model_type: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    build_hf(model_type, folder)
    capsys.readouterr()
    code = main(["spectrum", str(folder), "--max-samples", "2", "--layers", "0,-1", "--json"])
    out = capsys.readouterr()
    return code or 0, out.out, out.err


@pytest.mark.parametrize("model_type", ["imagegpt", "maskformer-swin"])
def test_read_and_proven(model_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = spectrum(model_type, tmp_path / "m", capsys)
    assert code == 0
    layers = json.loads(out)["layers"]
    assert layers and {layer["qkv_source"] for layer in layers} == {"generic (verified)"}


class InlineSoftmax(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return nn.Softmax(dim=-1)(w)


def test_an_inline_softmax_module_is_a_softmax() -> None:
    assert computes_softmax(InlineSoftmax())


def test_sequence_first_attention_is_refused_by_the_first_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = spectrum("fsmt", tmp_path / "m", capsys)
    assert code == 2 and "[qkv-unreadable]" in err and "KeyError" not in err
    assert "in groups of" in err and "sequence first" in err


def test_an_error_raised_in_condcli_own_frame_is_condcli_s() -> None:
    """A KeyError raised by condcli's own wrapper around the forward is never the model's refusal."""
    where = str(Path(condcli.__file__).parent / "adapters" / "wrapper.py")
    scope: dict[str, object] = {}
    exec(compile("def run(inputs):\n    return inputs['pixel_values']\n", where, "exec"), scope)
    with pytest.raises(KeyError) as e:
        scope["run"]({})  # type: ignore[operator]
    assert _raised_by_condcli(e.value)


def test_an_attention_with_no_softmax_has_no_p(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """YOSO returns its context as its weights: no P is taken from it; it computes none."""
    code, out, _ = spectrum("yoso", tmp_path / "m", capsys)
    assert code == 0
    for layer in json.loads(out)["layers"]:
        assert "computes no softmax" in layer["probs_note"]


def test_a_softmax_feature_gate_is_no_attention() -> None:
    from transformers import PatchTSMixerConfig, PatchTSMixerModel

    config = PatchTSMixerConfig(context_length=32, patch_length=8, patch_stride=8, d_model=16, num_layers=2)
    with pytest.raises(Refused) as e:
        adapter_for(PatchTSMixerModel(config).eval())
    assert e.value.code == "no-attention" and "feature gate" in str(e.value)


class LatentAttention(nn.Module):
    """MLA's projections: q through a low-rank pair with a norm, k/v through a shared latent."""

    def __init__(self) -> None:
        super().__init__()
        self.q_a_proj, self.q_a_layernorm, self.q_b_proj = nn.Linear(8, 4), nn.LayerNorm(4), nn.Linear(4, 8)
        self.kv_a_proj_with_mqa, self.kv_a_layernorm = nn.Linear(8, 4), nn.LayerNorm(4)
        self.kv_b_proj = nn.Linear(4, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise TypeError("topk(): argument 'k' must be int, not NoneType")


class LatentModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([LatentAttention()])

    @property
    def dummy_inputs(self) -> dict[str, torch.Tensor]:
        return {"x": torch.zeros(1, 3, 8)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers[0](x)  # type: ignore[no-any-return]


def test_the_latent_path_and_the_failed_probe_are_named() -> None:
    assert "kv_a_proj_with_mqa → kv_a_layernorm → kv_b_proj" in _between(LatentModel(), "layers.0", Seen())
    r = refusal(LatentModel())
    assert r.code == "qkv-unreadable"
    assert "it raised TypeError: topk()" in str(r) and "q_a_proj → q_a_layernorm → q_b_proj" in str(r)


def test_weights_returned_in_parts_are_named_as_parts() -> None:
    x = torch.randn(2, 8, 16)
    parts = {"global": torch.softmax(torch.randn(2, 4, 2, 10), -1), "local": torch.randn(2, 4, 1, 8, 10)}
    with pytest.raises(Refused) as e:
        returned_probs("layers.0", "one", "outer", 4, (x,), {}, (x, torch.randn(2, 2, 16), parts), 2)
    assert e.value.code == "p-unobservable"
    assert "in parts (global (2, 4, 2, 10), local (2, 4, 1, 8, 10))" in str(e.value)
    assert "(2, 2, 16), no probability matrix" in str(e.value)


def test_a_softmax_laid_batch_and_heads_then_blocks_is_said_so() -> None:
    seen = torch.softmax(torch.randn(2 * 8, 4, 64, 144), -1)
    with pytest.raises(Refused) as e:
        tapped_probs(8, (), {}, seen, 2)
    assert e.value.code == "p-unobservable"
    assert "its 8 heads share the first axis, then 4 block(s)" in str(e.value)
