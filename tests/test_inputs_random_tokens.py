"""Random token ids of a model without a tokenizer (issue 17, item 5): drawn batch by batch, never all at
once, and still the very ids one draw of the whole (n, length) tensor gives, whatever the batch size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from condcli.errors import InputError
from condcli.inputs.batches import InputSpec, Preprocessing, stream

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("vocab", [77, 30522, 2**33])
def test_streamed_ids_are_one_seeded_draw_for_every_batch_size(vocab: int) -> None:
    pre = Preprocessing("text", "none", max_length=40, vocab_size=vocab)
    gen = torch.Generator().manual_seed(5)
    reference = torch.randint(0, vocab, (23, 40), generator=gen)  # the whole tensor in one draw
    for batch_size in (1, 3, 8, 23, 100):
        batches = list(stream(pre, InputSpec(max_samples=23, batch_size=batch_size, seed=5)))
        assert batches[0].size == min(batch_size, 23)
        assert torch.equal(torch.cat([b.inputs["input_ids"] for b in batches]), reference)
        assert [n for b in batches for n in b.names] == [f"random tokens #{i}" for i in range(23)]


def test_no_draw_is_larger_than_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """30 million samples: each draw asks for one batch (the old code asked for all 30M × 64 ids first)."""
    drawn: list[tuple[int, ...]] = []
    real = torch.randint

    def randint(*args: Any, **kwargs: Any) -> torch.Tensor:
        size = tuple(args[2] if len(args) > 2 else kwargs["size"])
        drawn.append(size)
        assert size[0] <= 8, f"a draw of {size}"
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "randint", randint)
    pre = Preprocessing("text", "none", max_length=512, vocab_size=30522)
    inputs = stream(pre, InputSpec(max_samples=30_000_000, batch_size=8))
    assert inputs.expected == 30_000_000
    it = iter(inputs)
    first, second = next(it), next(it)
    assert (first.size, second.size) == (8, 8) and drawn == [(8, 64), (8, 64)]
    assert second.names[0] == "random tokens #8"


def test_the_first_batch_of_30m_samples_needs_no_memory_up_front() -> None:
    """In a child process under a 6 GiB address-space limit (30M × 64 int64 ids would be 15 GB)."""
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30));"
        "from condcli.inputs.batches import InputSpec, Preprocessing, stream;"
        "pre = Preprocessing('text', 'none', max_length=512, vocab_size=30522);"
        "b = next(iter(stream(pre, InputSpec(max_samples=30_000_000))));"
        "print(*b.inputs['input_ids'].shape)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["8", "64"]  # under the limit: nothing sized by the 30M samples was made


def test_a_batch_too_large_for_memory_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def randint(*args: Any, **kwargs: Any) -> torch.Tensor:
        raise RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 15360000000 bytes"
        )

    monkeypatch.setattr(torch, "randint", randint)
    pre = Preprocessing("text", "none", max_length=512, vocab_size=30522)
    with pytest.raises(InputError, match="a batch of 30000000 sequences of 64 random token ids does not fit"):
        next(iter(stream(pre, InputSpec(max_samples=30_000_000, batch_size=30_000_000))))
