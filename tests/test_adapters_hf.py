"""Hugging Face family adapters (BERT/RoBERTa, GPT-2, ViT, Nyströmformer) against independent references.

References are the models' own outputs (``output_hidden_states``, ``output_attentions`` from an eager run,
the self-attention module's real output) and explicit float64 recomputations — never condcli's probes.
Tiny random models are built from configs under ``torch.manual_seed(0)`` (hf_cases.py); the real
pretrained all-MiniLM-L6-v2 is tested in test_adapters_hf_minilm.py.

Note: transformers 5.x installs its own output-capturing forward hooks on a model the first time
``output_hidden_states``/``output_attentions`` is asked for, and leaves them there. Tests on shared models
therefore check that capture leaves the hook count unchanged; the cleanup tests use fresh models and
check for exactly zero hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import transformers as tf
from torch import nn

from condcli.adapters import adapter_for, hf_bert, hf_gpt2, hf_nystromformer, hf_vit
from condcli.capture import capture
from condcli.conditioning import Conditioning
from condcli.inputs.batches import Batch
from tests.hf_cases import (
    BUILDERS,
    FAMILY,
    LAYERS,
    SEG,
    SMALL,
    TEXT_SOFTMAX,
    D,
    H,
    batch_for,
    blocks,
    build,
    close,
    explicit_probs,
    head_values,
    reference,
    run_capture,
    self_attention,
    text_batch,
)


@pytest.fixture(scope="module")
def models() -> dict[str, nn.Module]:
    return {name: build(name) for name in BUILDERS}


# -------------------------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", list(BUILDERS))
def test_registry_picks_the_family(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    adapter = adapter_for(model)
    assert adapter.family == FAMILY[name]
    assert len(adapter.layers) == LAYERS and all(spec.heads == H for spec in adapter.layers)
    assert adapter.input_kind == ("images" if name == "vit" else "text")
    # the embedding point's name is its path in the model (condition_model replaces it by that name)
    assert model.get_submodule(adapter.embedding.name) is adapter.embedding.module
    assert [model.get_submodule(spec.name) for spec in adapter.layers] == blocks(name, model)
    families = {
        "hf-bert": hf_bert,
        "hf-roberta": hf_bert,
        "hf-gpt2": hf_gpt2,
        "hf-vit": hf_vit,
        "hf-nystromformer": hf_nystromformer,
    }
    for family, module in families.items():
        assert module.matches(model) == (module is families[FAMILY[name]]), family


def test_labels_and_approximation_flags(models: dict[str, nn.Module]) -> None:
    assert adapter_for(models["bert"]).layers[0].attention == "softmax over tokens (bidirectional)"
    assert adapter_for(models["gpt2"]).layers[0].attention == "causal softmax over tokens"
    approx = adapter_for(models["nys_approx"]).layers
    exact = adapter_for(models["nys_exact"]).layers
    assert all(
        s.approximation and s.attention == "Nyström approximation of softmax (8 landmarks)" for s in approx
    )
    assert all(not s.approximation and s.attention.startswith("softmax over tokens") for s in exact)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_eager_attention_restores_the_implementation(models: dict[str, nn.Module], name: str) -> None:
    m: Any = models[name]
    adapter = adapter_for(m)
    before = m.config._attn_implementation
    assert before == ("eager" if name.startswith("nys") else "sdpa")  # transformers 5.x defaults
    with adapter.eager_attention():
        assert m.config._attn_implementation == "eager"
        assert m.base_model.config._attn_implementation == "eager"
    assert m.config._attn_implementation == before
    assert m.base_model.config._attn_implementation == before


@pytest.mark.parametrize("name", list(BUILDERS))
def test_x_and_layer_inputs_equal_hidden_states(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    batch = batch_for(name, model)
    cap = run_capture(adapter_for(model), batch)
    hs = reference(model, batch, output_hidden_states=True).hidden_states
    assert torch.equal(cap.x, hs[0])  # the embedding output, bit for bit
    for i, block in enumerate(blocks(name, model)):
        layer = cap.layers[i]
        close(layer.x_in, hs[i])
        assert layer.attn_in.shape == (2, 1, *hs[i].shape[1:])
        if name == "gpt2":  # pre-norm: A_l = ln_1(X_l)
            expected = block.ln_1(hs[i])
        elif name == "vit":
            expected = block.layernorm_before(hs[i])
        else:  # post-norm: A_l = X_l
            expected = hs[i]
        close(layer.attn_in[:, 0], expected)


@pytest.mark.parametrize("name", [*TEXT_SOFTMAX, "vit", "nys_exact"])
def test_probs_equal_explicit_float64_softmax(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    adapter = adapter_for(model)
    batch = batch_for(name, model, padded=True)
    cap = run_capture(adapter, batch)
    for spec in adapter.layers:
        layer = cap.layers[spec.index]
        p = layer.probs
        n = p.shape[-1]
        assert p.shape == (2, 1, H, n, n)
        expected = explicit_probs(layer.attn_in, spec.weights(), batch.lengths, causal=name == "gpt2")
        close(p[:, 0].to(torch.float64), expected)
        close(p.sum(-1), torch.ones_like(p.sum(-1)))
        if batch.lengths is not None:  # padded keys get exactly no weight
            for b, length in enumerate(batch.lengths.tolist()):
                assert torch.all(p[b, ..., length:] == 0)


@pytest.mark.parametrize("name", [*TEXT_SOFTMAX, "vit", "nys_exact"])
def test_probs_equal_output_attentions_of_an_eager_run(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    batch = batch_for(name, model)  # no padding: HF's own 2-D mask path is fine for every model here
    cap = run_capture(adapter_for(model), batch)
    attentions = reference(model, batch, output_attentions=True).attentions
    assert len(attentions) == LAYERS
    for i, att in enumerate(attentions):
        close(cap.layers[i].probs[:, 0], att)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_head_weights_recombine_to_the_projections(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    adapter = adapter_for(model)
    for spec, block in zip(adapter.layers, blocks(name, model), strict=True):
        w = spec.weights()
        attn = self_attention(name, block)
        assert w.heads == H and w.wq.shape == (H, D, D // H) and w.wq.dtype == torch.float64
        if name == "gpt2":
            weight, bias = attn.c_attn.weight.detach().double(), attn.c_attn.bias.detach().double()
            for j, which in enumerate("qkv"):
                assert torch.equal(w.full(which), weight[:, j * D : (j + 1) * D])
            got_bias = torch.cat([w.bq.flatten(), w.bk.flatten(), w.bv.flatten()])  # type: ignore[union-attr]
            assert torch.equal(got_bias, bias)
            continue
        names = ("q_proj", "k_proj", "v_proj") if name == "vit" else ("query", "key", "value")
        for which, bias_of, proj in zip("qkv", (w.bq, w.bk, w.bv), names, strict=True):
            linear = getattr(attn, proj)
            assert torch.equal(w.full(which), linear.weight.detach().double().T)  # type: ignore[arg-type]
            if linear.bias is None:
                assert bias_of is None
            else:
                assert bias_of is not None and torch.equal(bias_of.flatten(), linear.bias.detach().double())


@pytest.mark.parametrize("name", TEXT_SOFTMAX)
def test_padded_samples_equal_each_sequence_alone(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    adapter = adapter_for(model)
    batch = text_batch(model, [9, 5])
    cap = run_capture(adapter, batch)
    assert [s.shape[0] for s in cap.samples()] == [9, 5]
    for b, length in enumerate([9, 5]):
        alone = Batch({k: v[b : b + 1, :length] for k, v in batch.inputs.items()}, None, ["alone"])
        ref = run_capture(adapter, alone)
        close(cap.samples()[b], ref.x[0])
        for i in range(LAYERS):
            layer, one = cap.layers[i], ref.layers[i]
            assert cap.samples(layer.x_in)[b].shape == (length, D)
            close(cap.samples(layer.x_in)[b], one.x_in[0])
            close(cap.samples(layer.attn_in[:, 0])[b], one.attn_in[0, 0])
            close(layer.probs[b, :, :, :length, :length], one.probs[0])


@pytest.mark.parametrize(("name", "lengths"), [("bert", [9, 5]), ("gpt2", [40, 12])])
def test_conditioning_touches_only_real_rows(
    models: dict[str, nn.Module], name: str, lengths: list[int]
) -> None:
    model = models[name]
    batch = text_batch(model, lengths)
    cap = run_capture(
        adapter_for(model), batch, conditioning=Conditioning(10.0), layers=[0], probes=("x_in",)
    )
    fed = cap.layers[0].x_in
    assert cap.x_conditioned is not None and torch.equal(cap.x_conditioned, fed)
    plain = run_capture(adapter_for(model), batch, layers=[0], probes=("x_in",))
    assert torch.equal(cap.x, plain.x)  # X is recorded before the shift
    for b, length in enumerate(lengths):
        k = min(length, D)
        shift = torch.zeros(fed.shape[1], D)
        shift[range(k), range(k)] = 10.0
        torch.testing.assert_close(fed[b, :length], cap.x[b, :length] + shift[:length], atol=1e-6, rtol=0)
        assert torch.equal(fed[b, length:], cap.x[b, length:])  # padding rows unchanged
        if length > D:  # real rows beyond k are untouched as well
            assert torch.equal(fed[b, D:length], cap.x[b, D:length])


@pytest.mark.parametrize("name", ["nys_approx", "nys_exact"])
def test_nystrom_p_times_v_reproduces_the_module_output(models: dict[str, nn.Module], name: str) -> None:
    model = models[name]
    adapter = adapter_for(model)
    batch = batch_for(name, model, padded=True)
    seen: dict[int, torch.Tensor] = {}
    own = [
        self_attention(name, block).register_forward_hook(
            lambda mod, args, out, i=i: seen.__setitem__(i, out[0].detach())
        )
        for i, block in enumerate(blocks(name, model))
    ]
    try:
        cap = capture(adapter, batch, to_end=True)  # the model's own hooks see every attention's output
    finally:
        for handle in own:
            handle.remove()
    for spec, block in zip(adapter.layers, blocks(name, model), strict=True):
        attn = self_attention(name, block)
        layer = cap.layers[spec.index]
        p = layer.probs[:, 0].to(torch.float64)  # (B, H, n, n)
        assert p.shape == (2, H, SEG, SEG)
        v = head_values(layer.attn_in, spec.weights())
        conv = nn.functional.conv2d(v, attn.conv.weight.double(), padding=attn.conv.padding, groups=H)
        context = (p @ v + conv).permute(0, 2, 1, 3).reshape(2, SEG, D)
        close(context, seen[spec.index].to(torch.float64))
        for b, length in enumerate(batch.lengths.tolist()):  # type: ignore[union-attr]
            assert torch.all(p[b, ..., length:] == 0)  # the mask reaches every factor that sees keys
        if name == "nys_exact":
            close(p.sum(-1), torch.ones_like(p.sum(-1)))


def test_nystrom_forward_with_padding_matches_transformers_mask(models: dict[str, nn.Module]) -> None:
    """The adapter's (B, 1, 1, n) mask gives the model's own result where transformers' 2-D path works."""
    model = models["nys_exact"]
    batch = batch_for("nys_exact", model, padded=True)
    with torch.no_grad():
        own = model(**batch.inputs).logits
        ours = adapter_for(model).run(batch.inputs).logits
    close(ours, own)


RELATIVES: dict[str, tuple[Callable[[], nn.Module], str, bool]] = {
    # base layout identical to BERT's in transformers 5.x: (builder, family, causal)
    "xlm-roberta": (lambda: tf.XLMRobertaModel(tf.XLMRobertaConfig(**SMALL)), "hf-roberta", False),
    "camembert": (lambda: tf.CamembertForMaskedLM(tf.CamembertConfig(**SMALL)), "hf-roberta", False),
    "data2vec-text": (lambda: tf.Data2VecTextModel(tf.Data2VecTextConfig(**SMALL)), "hf-roberta", False),
    "ernie": (lambda: tf.ErnieModel(tf.ErnieConfig(**SMALL)), "hf-bert", False),
    "electra": (
        lambda: tf.ElectraForSequenceClassification(tf.ElectraConfig(embedding_size=16, **SMALL)),
        "hf-bert",
        False,
    ),
    "bert-decoder": (lambda: tf.BertLMHeadModel(tf.BertConfig(is_decoder=True, **SMALL)), "hf-bert", True),
}


@pytest.mark.parametrize("name", list(RELATIVES))
def test_bert_layout_relatives(name: str) -> None:
    builder, family, causal = RELATIVES[name]
    torch.manual_seed(0)
    model = builder().eval()
    adapter = adapter_for(model)
    assert adapter.family == family
    label = "causal softmax over tokens" if causal else "softmax over tokens (bidirectional)"
    assert adapter.layers[0].attention == label
    assert model.get_submodule(adapter.embedding.name) is adapter.embedding.module
    batch = text_batch(model, [9, 5])
    cap = run_capture(adapter, batch)
    hs = reference(model, batch, output_hidden_states=True).hidden_states
    assert torch.equal(cap.x, hs[0])  # ELECTRA: after embeddings_project, the first-block input
    for spec in adapter.layers:
        layer = cap.layers[spec.index]
        close(layer.x_in, hs[spec.index])
        expected = explicit_probs(layer.attn_in, spec.weights(), batch.lengths, causal=causal)
        close(layer.probs[:, 0].to(torch.float64), expected)


FRESH = ["bert", "gpt2", "vit", "nys_approx"]


@pytest.mark.parametrize("name", FRESH)
def test_capture_leaves_no_hooks_and_restores_attention(
    name: str, hook_count: Callable[[nn.Module], int]
) -> None:
    model: Any = build(name)
    assert hook_count(model) == 0
    impl = model.config._attn_implementation
    cap = capture(adapter_for(model), batch_for(name, model, padded=True))
    assert len(cap.layers) == LAYERS
    assert hook_count(model) == 0
    assert model.config._attn_implementation == impl


@pytest.mark.parametrize("name", FRESH)
def test_cleanup_after_a_forward_that_raises(name: str, hook_count: Callable[[nn.Module], int]) -> None:
    model: Any = build(name)
    adapter = adapter_for(model)
    batch = batch_for(name, model)
    impl = model.config._attn_implementation
    with torch.no_grad():
        before = adapter.run(batch.inputs)[0]

    def boom(module: nn.Module, args: tuple[Any, ...]) -> None:
        raise RuntimeError("boom in layer 1")

    own = blocks(name, model)[1].register_forward_pre_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="boom in layer 1"):
            capture(adapter, batch, conditioning=Conditioning(10.0))
    finally:
        own.remove()
    assert hook_count(model) == 0
    assert model.config._attn_implementation == impl
    with torch.no_grad():
        after = adapter.run(batch.inputs)[0]
    assert torch.equal(after, before)
