"""P handed to the spectra a few heads at a time (long sequences): the cut is within budget and the summaries
are those of float64 SVD of every matrix, whatever the cut."""

from __future__ import annotations

import pytest
import torch

from condcli.analysis import persample
from condcli.analysis.persample import head_chunks, summarize_heads


def _probs(samples: int, groups: int, heads: int, n: int) -> list[torch.Tensor]:
    logits = torch.randn(samples, groups, heads, n, n, generator=torch.Generator().manual_seed(0)) * 4
    return list(logits.softmax(-1).unbind(0))


def test_chunks_are_views_of_every_head_in_order_within_the_byte_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = _probs(2, 1, 6, 16)
    per_head = 8 * 2 * 16 * 16  # float64 bytes of one head over both samples
    monkeypatch.setattr(persample, "CHUNK_BYTES", 2 * per_head)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    chunks = head_chunks(p)
    assert [c[0].shape[1] for c in chunks] == [2, 2, 2]
    for s, sample in enumerate(p):
        joined = torch.cat([c[s] for c in chunks], dim=1)
        assert torch.equal(joined, sample)
        assert all(c[s].untyped_storage().data_ptr() == sample.untyped_storage().data_ptr() for c in chunks)


def test_at_least_one_head_per_thread_and_one_chunk_when_small(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _probs(1, 1, 5, 8)
    monkeypatch.setattr(persample, "CHUNK_BYTES", 1)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert [c[0].shape[1] for c in head_chunks(p)] == [2, 2, 1]
    monkeypatch.setattr(persample, "CHUNK_BYTES", 64 * 2**20)
    assert len(head_chunks(p)) == 1


@pytest.mark.parametrize("budget", [1, 64 * 2**20])
def test_summaries_are_float64_svd_of_every_matrix(monkeypatch: pytest.MonkeyPatch, budget: int) -> None:
    p = _probs(3, 2, 4, 12)
    monkeypatch.setattr(persample, "CHUNK_BYTES", budget)
    got = summarize_heads(p, torch.float32, "svd")
    for s, sample in enumerate(p):
        ref = torch.linalg.svdvals(sample.to(torch.float64))  # (G, H, n)
        torch.testing.assert_close(got.sigma[s], ref, rtol=1e-12, atol=0.0)
        torch.testing.assert_close(got.kappa[s], ref[..., 0] / ref[..., -1], rtol=1e-10, atol=0.0)
    assert got.kappa.shape == got.below.shape == got.rank.shape == (3, 2, 4)
