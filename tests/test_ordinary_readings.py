"""Issue 42: ordinary softmax attention in less common dress is read, each reading proven on the first batch
like every generic one: ``linear_q``/``linear_k``/``linear_v`` names (conformer blocks), a grouped 1×1
convolution (SqueezeBERT) read as the block-diagonal map it computes, a quantization wrapper of a Linear,
and a block the model runs by ``.forward()`` (its hooks reached through capture's routing)."""

from __future__ import annotations

import torch
from torch import nn

from condcli.adapters import adapter_for
from condcli.adapters.generic.maps import linear_map
from condcli.adapters.generic.verify import prove
from condcli.capture import capture
from tests.families import images
from tests.toy_models import ToyModel
from tests.toy_readings import ToyProjections, with_attention


def test_linear_q_k_v_names_are_read_and_proven() -> None:
    model = with_attention(lambda d, h: ToyProjections(d, h, ("linear_q", "linear_k", "linear_v")))
    batch = images()
    adapter, _ = prove(adapter_for(model), batch.inputs, batch.size)
    assert [s.qkv_source for s in adapter.layers] == ["generic (verified)"] * 2


def test_a_grouped_1x1_convolution_is_its_block_diagonal_map() -> None:
    torch.manual_seed(0)
    conv = nn.Conv1d(8, 12, 1, groups=4).double()
    mapped = linear_map(conv)
    assert mapped is not None
    w, b = mapped
    x = torch.randn(3, 8, 5, dtype=torch.float64)  # (B, C, N) as SqueezeBERT lays its tokens
    reference = conv(x)  # the module itself: the independent reference
    assert b is not None
    ours = torch.einsum("oc,bcn->bon", w, x) + b[None, :, None]
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)


class QuantLinear(nn.Module):
    """I-BERT's QuantLinear with quantization off: its own weight and bias, F.linear, a tuple out."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in))
        self.bias = nn.Parameter(torch.randn(d_out))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return nn.functional.linear(x, self.weight, self.bias), None


class QuantWrapper(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.inner = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_quantization_wrappers_of_a_linear_are_read_as_it() -> None:
    torch.manual_seed(0)
    q = QuantLinear(6, 4)
    x = torch.randn(2, 6)
    mapped = linear_map(q)
    assert mapped is not None and mapped[1] is not None
    torch.testing.assert_close(x @ mapped[0].T + mapped[1], q(x)[0])
    wrapped = QuantWrapper(6, 4)
    got = linear_map(wrapped)
    assert got is not None and got[1] is not None
    torch.testing.assert_close(x @ got[0].T + got[1], wrapped(x))


class ForwardCaller(ToyModel):
    """The toy whose blocks are run by ``layer.forward(x)``, as SqueezeBERT's encoder runs its layers."""

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        B = pixel_values.shape[0]
        patches = pixel_values.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(B, -1, 192)
        x = self.embed(patches)
        for layer in self.layers:
            x = layer.forward(x)
        return x


def test_a_block_run_by_forward_is_captured_as_the_model_computes_it() -> None:
    torch.manual_seed(0)
    model = ForwardCaller(d=16, heads=4, depth=2).eval()
    batch = images()
    adapter = adapter_for(model)
    got = capture(adapter, batch)
    # the reference: each block's input as the model's own forward computes it
    with torch.no_grad():
        pixels = batch.inputs["pixel_values"]
        B = pixels.shape[0]
        x = model.embed(pixels.unfold(2, 8, 8).unfold(3, 8, 8).permute(0, 2, 3, 1, 4, 5).reshape(B, -1, 192))
        inputs = []
        for layer in model.layers:
            inputs.append(x)
            x = layer(x)
    assert len(got.layers) == 2
    for i, ref in enumerate(inputs):
        layer = got.layers[i]
        assert layer.x_in is not None
        torch.testing.assert_close(layer.x_in, ref)
    assert "forward" not in vars(model.layers[0])  # the routing is undone


def test_weights_returned_in_a_list_by_a_method_the_attention_calls_are_p() -> None:
    """OpenAI GPT's attention passes output_attentions on to its own ``_attn``, which branches on it, and
    returns a list: P is asked for and read, equal to the model's own output_attentions."""
    import transformers as tf

    from condcli.inputs.batches import Batch

    torch.manual_seed(0)
    config = tf.OpenAIGPTConfig(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    model = tf.OpenAIGPTModel(config).eval()
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(1))
    got = capture(adapter_for(model), Batch({"input_ids": ids}, None, ["a", "b"]))
    with torch.no_grad():
        reference = model(input_ids=ids, output_attentions=True).attentions
    for i in range(2):
        probs = got.layers[i].probs
        assert probs is not None
        torch.testing.assert_close(probs[:, 0], reference[i])
