"""Issue 42: every refusal carries a code derived from what a forward of the model showed, one test per code;
a block whose sequence is shortened and a chunked P are analysed at their own length or refused naming both
lengths; an inner module of another signature is never what runs; a model that rejects condcli's inputs is
refused with what it said it needs.

Each toy's code is the one its own forward makes true: a softmax whose output multiplies the values
(attention), or none (linear attention), or no attention-named module at all."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import nn

from condcli.adapters import adapter_for
from condcli.analysis.persample import ShortenedSequence, trim
from condcli.loading.hf import analysed_module
from condcli.reports.refusal import Refused, split
from condcli.reports.spectrum import refused_json

D, N = 8, 6


class Probed(nn.Module):
    """A toy whose probe batch is its own ``dummy_inputs`` (as an HF model's)."""

    @property
    def dummy_inputs(self) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(2, N, D, generator=torch.Generator().manual_seed(0))}


class Mixer(nn.Module):  # no softmax and no attention in its name
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x)))


class ReluLinearAttention(nn.Module):
    """Linear attention (EfficientViT-B's LiteMLA): relu(q) (relu(k)ᵀ v), one fused projection it calls
    ``to_all`` (not a name the generic path reads), no softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.to_all = nn.Conv1d(D, 3 * D, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.to_all(x.transpose(1, 2)).transpose(1, 2).chunk(3, -1)
        return x + torch.relu(q) @ (torch.relu(k).transpose(1, 2) @ v)


class EinsumAttention(nn.Module):
    """XLNet's relative attention in small: q, k, v plain parameters used in einsum, a softmax over keys."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Parameter(torch.randn(D, 2, D // 2) / D**0.5)
        self.k = nn.Parameter(torch.randn(D, 2, D // 2) / D**0.5)
        self.v = nn.Parameter(torch.randn(D, 2, D // 2) / D**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (torch.einsum("bnd,dhe->bnhe", x, w) for w in (self.q, self.k, self.v))
        p = torch.softmax(torch.einsum("bihe,bjhe->bhij", q, k), -1)
        return x + torch.einsum("bhij,bjhe->bihe", p, v).flatten(2)


class Stack(Probed):
    def __init__(self, block: type[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList([block() for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def refusal_of(model: nn.Module) -> Refused:
    with pytest.raises(Refused) as e:
        adapter_for(model)
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    return e.value


def test_no_attention_when_no_softmax_ran_and_no_attention_module() -> None:
    r = refusal_of(Stack(Mixer))
    assert r.code == "no-attention" and str(r).startswith("[no-attention] ")
    assert "no softmax over keys was computed and no attention module ran" in str(r)


def test_linear_attention_when_an_attention_module_ran_without_a_softmax() -> None:
    r = refusal_of(Stack(ReluLinearAttention))
    assert r.code == "linear-attention"
    assert "ReluLinearAttention" in str(r) and "no softmax P exists" in str(r)


def test_qkv_unreadable_names_the_parameters_used_in_einsum() -> None:
    r = refusal_of(Stack(EinsumAttention))
    assert r.code == "qkv-unreadable"
    assert "layers.0 (EinsumAttention" in str(r) and "parameters used in einsum (q, k, v)" in str(r)


def test_p_unobservable_for_weights_returned_as_a_band_names_both_widths() -> None:
    from condcli.adapters.generic.probs import returned_probs

    x = torch.randn(2, 16, D)
    band = torch.softmax(torch.randn(2, 16, 2, 5), -1)  # (B, n, H, 2w+1): Longformer's layout
    with pytest.raises(Refused) as e:
        returned_probs("encoder.layer.0", "one", "outer", 2, (x,), {}, (x, band), 2)
    assert e.value.code == "p-unobservable"
    assert "for each of the 16 queries, 5 keys around it" in str(e.value)


def test_per_window_p_returned_three_d_is_read_window_by_window() -> None:
    """SAM's windowed attention returns P as (B·G·H, q, k): batch, then window, then head folded into one
    axis. Each window's square P is read as its own group: window g of sample b, head h is row
    (b·G + g)·H + h (issue 42)."""
    from condcli.adapters.generic.probs import returned_probs

    batch, windows, heads, w = 2, 3, 2, 4
    folded = torch.softmax(torch.randn(batch * windows * heads, w, w, dtype=torch.float64), -1)
    x = torch.randn(batch * windows, w, D)
    p = returned_probs("vision_encoder.layers.0", "one", "outer", heads, (x,), {}, (x, folded), batch)
    assert p.shape == (batch, windows, heads, w, w)
    for b in range(batch):
        for g in range(windows):
            for h in range(heads):
                assert torch.equal(p[b, g, h], folded[(b * windows + g) * heads + h])


class NeedsBoxes(nn.Module):
    def forward(self, x: torch.Tensor, bbox_boxes: torch.Tensor | None = None) -> torch.Tensor:
        if bbox_boxes is None:
            raise ValueError("Bbox is required for horizontal relative position bias")
        return x


def test_inputs_when_the_model_rejects_what_it_was_given() -> None:
    from condcli.adapters.base import Adapter, EmbeddingPoint

    model = NeedsBoxes()
    adapter = Adapter("toy", model, EmbeddingPoint(model, "", "toy"), (), "text")
    with pytest.raises(Refused) as e:
        adapter.run({"x": torch.zeros(1, 3, D)})
    assert e.value.code == "inputs" and "Bbox is required" in str(e.value) and "x (1, 3, 8)" in str(e.value)
    assert "its forward also takes bbox_boxes" in str(e.value)


def test_an_error_raised_by_condcli_itself_stays_internal() -> None:
    from condcli.adapters.base import Adapter, EmbeddingPoint, group_tokens

    model = Mixer()
    adapter = Adapter("toy", model, EmbeddingPoint(model, "", "toy"), (), "text")

    # a condcli function misused as a hook: it raises from condcli's own frame (as a buggy probe would)
    model.register_forward_pre_hook(group_tokens)  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="reshape"):
        adapter.run({"x": torch.zeros(1, 3, D)})


class BrokenRotary(nn.Module):
    """Takes its inputs, then its own attention fails on them (CodeGen with a rotary width larger than its
    head: a shape error inside the model's own code, after X was formed)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.block = nn.Linear(D, D), nn.Identity()
        self.rotary = torch.ones(1, 1, 2 * D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(self.embed(x)) * self.rotary


def test_a_model_failing_after_x_in_its_own_code_is_an_inputs_refusal_naming_where() -> None:
    """The library lets the model's own error through (its callers clean up on it); the CLI reads that it
    came from the model's code with only a watch that passes torch calls on between, and makes it one
    [inputs] line, exit 2, naming the file and function, not an internal error."""
    from condcli.adapters.base import Adapter, EmbeddingPoint, model_failure
    from condcli.adapters.generic.watch import Watch
    from condcli.cli.main import _model_failed

    model = BrokenRotary()
    adapter = Adapter("toy", model, EmbeddingPoint(model.embed, "embed", "toy"), (), "text")
    with Watch(), pytest.raises(RuntimeError, match="must match the size") as e:  # the watch passes it on
        adapter.run({"x": torch.zeros(1, 3, D)})
    assert model_failure(e.value) == "test_refusal_codes.py (forward)"
    refused = _model_failed(e.value)
    assert isinstance(refused, Refused) and refused.code == "inputs" and refused.exit_code == 2
    said = str(refused)
    assert (
        "after taking them, in test_refusal_codes.py (forward): RuntimeError: The size of tensor a (8)"
        in said
    )


def test_a_model_failing_through_condclis_on_request_forward_is_still_the_models_failure() -> None:
    """The adapter's forward may be condcli's own wrapper that only calls the model (asking for the weights:
    generic.probs.hf_forward); the model's error below it is the model's (SAM at a size its tiny config does
    not fit was an internal error, exit 3)."""
    from condcli.adapters.base import Adapter, EmbeddingPoint, model_failure
    from condcli.adapters.generic.build import _plain_forward

    model = BrokenRotary()
    point = EmbeddingPoint(model.embed, "embed", "toy")
    adapter = Adapter("toy", model, point, (), "text", forward=partial(_plain_forward, model))
    with pytest.raises(RuntimeError, match="must match the size") as e:
        adapter.run({"x": torch.zeros(1, 3, D)})
    assert model_failure(e.value) == "test_refusal_codes.py (forward)"


def test_a_condcli_hook_raising_after_x_stays_internal() -> None:
    from condcli.adapters.base import Adapter, EmbeddingPoint, group_tokens, model_failure
    from condcli.cli.main import _model_failed

    model = BrokenRotary()
    model.rotary = torch.ones(1, 1, D)  # the model itself is fine
    adapter = Adapter("toy", model, EmbeddingPoint(model.embed, "embed", "toy"), (), "text")
    # a condcli function misused as a hook after X: it raises from condcli's own frame (a buggy probe)
    model.block.register_forward_pre_hook(group_tokens)  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="reshape") as e:
        adapter.run({"x": torch.zeros(1, 3, D)})
    assert model_failure(e.value) is None and _model_failed(e.value) is None


def test_layers_refused_entry_carries_code_and_text() -> None:
    coded = refused_json(3, "blocks.3", "[p-unobservable] P is a band")
    assert coded["reason"] == {"code": "p-unobservable", "text": "P is a band"}
    assert coded["refused"] == "P is a band" and coded["index"] == 3
    assert split("no code here") == (None, "no code here")


def test_a_shortened_block_is_taken_at_its_own_length_without_padding() -> None:
    pooled = torch.randn(2, 5, D)  # a block after pooling: 5 rows of a 20-token sample
    got = trim(pooled, torch.tensor([20, 20]), (0,))
    assert [tuple(m.shape) for m in got] == [(5, D), (5, D)]
    assert torch.equal(got[1], pooled[1])
    chunked = torch.randn(2, 1, 2, 20, 4)  # P of 20 queries over chunks of 4 keys: (B, G, H, q, w)
    assert [tuple(m.shape) for m in trim(chunked, torch.tensor([20, 20]), (2, 3))] == [(1, 2, 20, 4)] * 2
    full = torch.randn(2, 20, D)  # ordinary padding is still cut per sample
    assert [m.shape[0] for m in trim(full, torch.tensor([20, 12]), (0,))] == [20, 12]


def test_a_shortened_block_with_padded_samples_is_refused_naming_both_lengths() -> None:
    with pytest.raises(ShortenedSequence) as e:
        trim(torch.randn(2, 5, D), torch.tensor([20, 12]), (0,))
    said = str(e.value)
    assert said.startswith("[inputs] it runs at 5 tokens where the model was given 20") and "20, 12" in said
    assert e.value.exit_code == 2


class Inner(nn.Module):
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states


class Outer(nn.Module):
    main_input_name = "input_ids"

    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    @property
    def base_model(self) -> nn.Module:
        return self.inner

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.inner(input_ids.float())


def test_an_inner_base_model_of_another_signature_is_not_what_runs() -> None:
    model = Outer()
    assert analysed_module(model)[0] is model


def test_the_page_shows_each_refused_layer_with_its_code() -> None:
    from condcli.html.sections_spectrum import _footnotes

    page = _footnotes(
        {"layers": [], "layers_refused": [refused_json(2, "blocks.2", "[p-unobservable] a band")]}
    )
    assert "layer 2 blocks.2: no numbers, refused: [p-unobservable] a band" in page


def test_x_that_comes_in_groups_is_refused_naming_its_shape() -> None:
    """X is N × d per sample; a first block that reads its tokens as a stack of groups (CSATv2, found by the
    sweep) gives no X, and the run says so in one coded line instead of failing inside the analysis."""
    from condcli.analysis.embedding import EmbeddingAccumulator

    with pytest.raises(Refused) as e:
        EmbeddingAccumulator(10.0).add([torch.randn(4, 6, D), torch.randn(4, 6, D)])
    assert e.value.code == "qkv-unreadable" and "came as (4, 6, 8) per sample" in str(e.value)
    # what reaches the attention is said as what its shape shows (CSATv2: a pooled 2-D map), not as a claim
    # that tokens were regrouped
    assert "a 3-axis map (a convolutional feature map, or tokens regrouped or pooled" in str(e.value)
    EmbeddingAccumulator(10.0).add([torch.randn(6, D)])  # the ordinary (N, d) sample is taken


def test_weights_returned_inside_a_nested_tuple_are_p() -> None:
    """I-BERT's attention returns ((context, weights), (their scaling factors)): the weights are P, not
    "no attention weights" (issue 42: a false reason the sweep found)."""
    from condcli.adapters.generic.probs import returned_probs

    x = torch.randn(2, 5, D)
    weights = torch.softmax(torch.randn(2, 2, 5, 5, dtype=torch.float64), -1)
    got = returned_probs("encoder.layer.0", "one", "outer", 2, (x,), {}, ((x, weights), (None, None)), 2)
    assert got.shape == (2, 1, 2, 5, 5) and torch.equal(got[:, 0], weights)


def test_scores_returned_as_weights_are_named_as_such() -> None:
    """ProphetNet returns its scores before the softmax where output_attentions asks for weights: the refusal
    says that what came back is no probability matrix, not that nothing came back."""
    from condcli.adapters.generic.probs import returned_probs

    x = torch.randn(2, 5, D)
    scores = torch.randn(2, 2, 5, 5)
    with pytest.raises(Refused) as e:
        returned_probs("layers.0", "one", "outer", 2, (x,), {}, (x, scores), 2)
    assert e.value.code == "p-unobservable"
    assert "what it returned beside its output ((2, 2, 5, 5)) is no probability matrix" in str(e.value)


class AssertsItsSize(nn.Module):
    """timm's patch embedding checks the image size with an assert: the model rejecting its inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.shape[-1] == 64, f"Input height ({x.shape[-1]}) doesn't match model (64)."
        return x


def test_an_assert_in_the_models_own_code_is_an_inputs_refusal() -> None:
    from condcli.adapters.base import Adapter, EmbeddingPoint

    model = AssertsItsSize()
    adapter = Adapter("toy", model, EmbeddingPoint(model, "", "toy"), (), "images")
    with pytest.raises(Refused) as e:
        adapter.run({"x": torch.zeros(1, 3, 224)})
    assert e.value.code == "inputs" and "AssertionError: Input height (224) doesn't match model (64)" in str(
        e.value
    )


class SEModule(nn.Module):
    """Squeeze-and-excitation, as timm names it: a pooled vector gates the channels (no weights on tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.fc(x.mean(1, keepdim=True)))


class GatedBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(D, D)
        self.attn = SEModule()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x + torch.relu(self.mlp(x)))


class LiteMLA(nn.Module):
    """EfficientViT's ReLU linear attention, named MLA (multi-scale linear attention): q(kᵀv), no softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = torch.relu(self.qkv(x)).chunk(3, -1)
        return x + q @ (k.transpose(-2, -1) @ v) / x.shape[1]


def test_channel_gates_named_attention_are_no_attention() -> None:
    """An SE module held as ``attn`` ran and computed no softmax: it gates channels, so the model has no
    attention (was: "linear attention", which names something SE does not compute)."""
    r = refusal_of(Stack(GatedBlock))
    assert r.code == "no-attention"
    assert "SEModule" in str(r) and "gate channels by a pooled vector" in str(r)


def test_a_module_named_mla_is_an_attention_module() -> None:
    """EfficientViT's LiteMLA (no "attention" in its name) ran without a softmax: linear attention, not "no
    attention module ran"."""
    r = refusal_of(Stack(LiteMLA))
    assert r.code == "linear-attention" and "LiteMLA" in str(r)
