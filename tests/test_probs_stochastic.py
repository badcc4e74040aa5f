"""Whether a returned tensor is attention probabilities (``adapters/generic/probs.py`` ``stochastic``): a
float32 P is summed in float32 first, and the verdict is the float64 sums' wherever that could differ."""

from __future__ import annotations

import pytest
import torch

from condcli.adapters.generic import probs


def _float64_verdict(t: torch.Tensor, rows: probs.Rows) -> bool:
    """The reference: entries in [0, 1] and each row's float64 sum within 64·eps·k of 1 (at most 1 + that)."""
    if (
        not t.is_floating_point()
        or t.numel() == 0
        or not (t.min() >= 0 and t.max() <= 1 + 64 * torch.finfo(t.dtype).eps)
    ):
        return False
    sums = t.to(torch.float64).sum(-1)
    tol = 64 * torch.finfo(t.dtype).eps * t.shape[-1]
    return bool(((sums - 1).abs() <= tol).all() if rows == "one" else (sums <= 1 + tol).all())


def _softmax(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(2, 3, n, n, generator=g) * 4, -1)


@pytest.mark.parametrize("rows", ["one", "at most one"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_verdicts_are_the_float64_sums(rows: probs.Rows, dtype: torch.dtype) -> None:
    p = _softmax(64).to(dtype)
    k = p.shape[-1]
    tol = 64 * torch.finfo(dtype).eps * k
    cases = {
        "softmax": p,
        "a row short": torch.cat([p[..., :1, :] * 0.5, p[..., 1:, :]], -2),
        "a row long": torch.cat([(p[..., :1, :] * 1.5).clamp(max=1), p[..., 1:, :]], -2),
        "negative": p - 1e-3,
        "empty": p[..., :0],
    }
    # rows whose sums sit right at the tolerance, either side: the float32 sums cannot settle these
    for name, off in (("at tol, inside", 0.999), ("at tol, outside", 1.001)):
        scaled = (p.to(torch.float64) * (1 + off * tol)).clamp(max=1).to(dtype)
        cases[name] = scaled
    for name, t in cases.items():
        assert probs.stochastic(t, rows) == _float64_verdict(t, rows), name


def test_float32_settles_most_without_the_float64_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """A float32 softmax is settled by its float32 sums; a sum within their error of the tolerance goes to
    the float64 sums, which decide it."""
    calls: list[int] = []
    inner = probs._sums64

    def spy(t: torch.Tensor) -> torch.Tensor:
        calls.append(t.numel())
        return inner(t)

    monkeypatch.setattr(probs, "_sums64", spy)
    p = _softmax(512)
    assert probs.stochastic(p) and not calls
    assert not probs.stochastic(p * 0.5) and not calls
    k = p.shape[-1]
    tol = 64 * torch.finfo(torch.float32).eps * k
    broad = torch.softmax(torch.randn(2, 3, 512, 512, generator=torch.Generator().manual_seed(1)), -1)
    edge = (broad.to(torch.float64) * (1 + tol)).to(torch.float32)  # rows at 1 + tol: within γ_k of it
    assert float(edge.max()) < 1
    assert probs.stochastic(edge) == _float64_verdict(edge, "one")
    assert calls
