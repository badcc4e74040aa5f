"""The two metrics added through the registry, against independent references: attention entropy H(P) from
transformers' own ``output_attentions`` (causal support counted from the mask's structure, not from P), and
the stable rank of X_l from NumPy SVDs of ``hidden_states``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from condcli.analysis.spectrum import SpectrumOptions, analyse_spectrum
from condcli.errors import InputError
from condcli.inputs.batches import Batch, InputSpec, InputStream, stream
from condcli.loading.samples import samples_dir
from condcli.loading.sources import LoadOptions, load
from condcli.reports.spectrum import SpectrumReport
from condcli.spectra import attention_entropy
from condcli.spectra.entropy import attention_support
from tests.helpers import np_sigma


def replayed(batches: list[Batch]) -> InputStream:
    return InputStream(
        "synthetic", "replayed", lambda s: iter(batches), expected=sum(b.size for b in batches)
    )


def np_entropy(P: np.ndarray, support: np.ndarray) -> np.ndarray:
    """(H, q, k) one sample's P and (q,) keys per query → (H,): mean normalised entropy over queries that
    attend to more than one key."""
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0)
    h = -plogp.sum(-1)  # (H, q)
    keep = support > 1
    return (h[:, keep] / np.log(support[keep])[None, :]).mean(-1)


@pytest.fixture(scope="module", params=["bert-docstrings", "gpt2-docstrings"])
def text_case(request: pytest.FixtureRequest) -> tuple[str, list[Batch], SpectrumReport, Any]:
    from transformers import AutoModel

    name = request.param
    loaded = load(name, LoadOptions(device="cpu"))
    batches = list(stream(loaded.preprocessing, InputSpec(max_samples=5, batch_size=5)))
    assert batches[0].lengths is not None and len(set(batches[0].lengths.tolist())) > 1  # really padded
    options = SpectrumOptions(lam=10.0, conditioned=False, heads=True)
    report = analyse_spectrum(loaded, replayed(batches), options, "test")
    fresh = AutoModel.from_pretrained(str(samples_dir() / name), attn_implementation="eager")
    fresh.eval()
    with torch.no_grad():
        out = fresh(**batches[0].inputs, output_hidden_states=True, output_attentions=True)
    return name, batches, report, out


def test_attention_entropy_equals_numpy_on_output_attentions(text_case: Any) -> None:
    name, batches, report, out = text_case
    lengths = batches[0].lengths.tolist()
    for layer in report.layers:
        att = out.attentions[layer.index].double().numpy()  # (B, H, T, T)
        per_head = []
        for b, n in enumerate(lengths):
            # keys each query may attend to: all n real tokens, or i + 1 under GPT-2's causal mask
            support = np.arange(1, n + 1) if name.startswith("gpt2") else np.full(n, n)
            per_head.append(np_entropy(att[b, :, :n, :n], support))
        ref = np.stack(per_head)  # (S, H)
        got = layer.plain["attention_entropy"]
        assert got is not None
        np.testing.assert_allclose(got.per_sample, ref.min(1), rtol=1e-9)
        assert layer.heads_detail is not None
        for h, head in enumerate(layer.heads_detail):
            assert head.attention_entropy is not None
            np.testing.assert_allclose(head.attention_entropy.per_sample, ref[:, h], rtol=1e-9)
        assert layer.entropy_heads is not None
        np.testing.assert_allclose(layer.entropy_heads, np.median(ref, 0), rtol=1e-9)
        assert 0 < ref.min() and ref.max() <= 1  # trained attention: neither collapsed nor uniform


def test_stable_rank_equals_numpy_on_hidden_states(text_case: Any) -> None:
    _, batches, report, out = text_case
    lengths = batches[0].lengths.tolist()
    for layer in report.layers:
        hs = out.hidden_states[layer.index].double().numpy()
        ref = []
        for b, n in enumerate(lengths):
            s = np_sigma(hs[b, :n])
            ref.append((s**2).sum() / s[0] ** 2)
        got = layer.plain["stable_rank"]
        assert got is not None
        np.testing.assert_allclose(got.per_sample, ref, rtol=1e-9)


def test_entropy_of_known_distributions() -> None:
    n = 6
    uniform = torch.full((n, n), 1 / n, dtype=torch.float64)
    one_hot = torch.eye(n)  # collapsed: exact zeros elsewhere, as a float32 softmax of big logits gives
    causal_uniform = torch.tril(torch.ones(n, n, dtype=torch.float64)) / torch.arange(1, n + 1)[:, None]
    half = torch.zeros(n, n, dtype=torch.float64)
    half[:, :2] = 0.5  # every query splits evenly over 2 of its 6 keys
    np.testing.assert_allclose(attention_entropy(uniform), 1.0, rtol=1e-12)
    np.testing.assert_allclose(attention_entropy(causal_uniform, causal=True), 1.0, rtol=1e-12)
    np.testing.assert_allclose(attention_entropy(half), np.log(2) / np.log(6), rtol=1e-12)
    assert float(attention_entropy(one_hot)) == 0.0
    assert float(attention_entropy(one_hot, causal=True)) == 0.0
    # causal with fewer queries than keys (a cached prefix): query i sees i + 1 + (k − q) keys
    tail = causal_uniform[-2:]
    np.testing.assert_allclose(attention_entropy(tail, causal=True), 1.0, rtol=1e-12)
    assert float(attention_entropy(torch.ones(1, 1))) == 1.0  # one key only: nothing to lose
    p = torch.tensor([[0.7, 0.2, 0.1]], dtype=torch.float64)
    ref = -(0.7 * np.log(0.7) + 0.2 * np.log(0.2) + 0.1 * np.log(0.1)) / np.log(3)
    np.testing.assert_allclose(float(attention_entropy(p)), ref, rtol=1e-12)


def test_support_follows_the_masks_structure() -> None:
    full = attention_support(5, 5)
    causal = attention_support(5, 5, causal=True)
    sliding = attention_support(5, 5, causal=True, window=2)  # HF sliding_window: the last 2 keys
    banded = attention_support(5, 5, window=1)  # ModernBERT local: keys within ±1
    tail = attention_support(2, 5, causal=True)  # 2 queries at positions 3 and 4
    assert full.tolist() == [5, 5, 5, 5, 5]
    assert causal.tolist() == [1, 2, 3, 4, 5]
    assert sliding.tolist() == [1, 2, 2, 2, 2]
    assert banded.tolist() == [2, 3, 3, 3, 2]
    assert tail.tolist() == [4, 5]
    # a sliding-window row spread evenly over its 2 allowed keys is uniform: entropy 1, not log 2 / log 5
    p = torch.zeros(5, 5, dtype=torch.float64)
    for i in range(5):
        p[i, max(0, i - 1) : i + 1] = 1.0 / min(i + 1, 2)
    np.testing.assert_allclose(float(attention_entropy(p, causal=True, window=2)), 1.0, rtol=1e-12)


def test_entropy_terms_match_xlogy_and_refuse_negative_probabilities() -> None:
    """H(P)'s p·log p (log and product in one buffer) is torch's xlogy to within an ulp of the log, with
    0·log 0 = 0 and an overflowing term left infinite; a negative entry is one clear error."""
    from condcli.spectra.entropy import _plogp

    g = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(4, 3, 50, 50, generator=g, dtype=torch.float64) * 6, -1)
    p[0, 0, :, :7] = 0.0  # exact zeros, as a collapsed float32 softmax gives
    ref = torch.special.xlogy(p, p)
    got = _plogp(p.clone())
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=4e-16, atol=0)
    assert bool((got[0, 0, :, :7] == 0).all())
    np.testing.assert_allclose(
        attention_entropy(p).numpy(), (-ref.sum(-1) / np.log(50)).mean(-1).numpy(), rtol=1e-14
    )
    huge = torch.tensor([[1e308, 0.0]], dtype=torch.float64)
    assert torch.equal(_plogp(huge.clone()), torch.special.xlogy(huge, huge))  # [inf, 0]
    with pytest.raises(InputError, match="negative entries"):
        attention_entropy(torch.tensor([[0.5, 0.6, -0.1]]))


def test_head_entropy_a_head_per_thread_is_the_chunked_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """From ENTROPY_THREADED entries a head, H(P) runs one head per task on the thread pool: the same values,
    bitwise, as the chunks of heads below it (causal and windowed)."""
    from types import SimpleNamespace

    from condcli.analysis import layers

    g = torch.Generator().manual_seed(5)
    n = 520
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    p = torch.softmax(torch.randn(2, 3, n, n, generator=g).masked_fill(mask, -math.inf), -1)
    for spec in (SimpleNamespace(causal=True, window=None), SimpleNamespace(causal=True, window=64)):
        assert n * n >= layers.ENTROPY_THREADED
        threaded = layers._head_entropy(p, spec)  # type: ignore[arg-type]
        monkeypatch.setattr(layers, "ENTROPY_THREADED", 10**12)
        chunked = layers._head_entropy(p, spec)  # type: ignore[arg-type]
        monkeypatch.undo()
        assert torch.equal(threaded, chunked)
        assert threaded.shape == (3,)


@pytest.mark.parametrize(("q", "k"), [(7, 7), (257, 257), (300, 520), (600, 600), (100, 1000), (1000, 1301)])
def test_row_entropy_skips_the_zeros_a_causal_mask_leaves_bitwise(q: int, k: int) -> None:
    """H(P)'s rows, a block of ROWS at a time, skip the keys past a causal block's reach where they are all
    zero: the same float64 sums, bitwise, as p·log p summed over every key; a nonzero there is not skipped."""
    from condcli.spectra.entropy import _plogp, _row_entropy, _row_entropy_batched

    g = torch.Generator().manual_seed(q)
    mask = torch.arange(k)[None, :] > torch.arange(q)[:, None] + (k - q)
    p = torch.softmax((torch.randn(2, 3, q, k, generator=g) * 3).masked_fill(mask, -math.inf), -1)
    stray = p.clone()
    stray[1, 2, 0, -1] = 0.01  # past the first block's causal reach, where q < k
    for t in (p, stray):
        assert torch.equal(_row_entropy(t, causal=True), _plogp(t.to(torch.float64)).sum(-1).neg())
        assert torch.equal(_row_entropy_batched(t), _row_entropy(t))  # an accelerator's path, on the CPU
