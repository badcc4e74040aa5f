"""Per-sample results of two ranks put back in sample order give one process's report, bitwise.

Both ranks run here, one after the other, in this process: rank 1 analyses its batches (1, 3, …) and hands
over what it would send (pickled, as the exchange does); rank 0 analyses batches 0, 2, … and gathers. The
reference is the same command run once, unsharded. In-process and sequential, so this covers many commands
and families in seconds; tests/test_torchrun.py runs the real processes.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import Result

import condcli.analysis.driver as driver
from condcli.analysis.gather import Order
from condcli.distributed import World
from condcli.errors import InternalError


class _Sent(Exception):
    pass


def sharded(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Result:
    """``args`` as rank 1 then rank 0 of two; rank 0's result."""
    sent: dict[str, Any] = {}

    def as_rank(rank: int) -> Result:
        monkeypatch.setattr(driver, "world", lambda: World(rank, 2, rank))

        def results(tag: str, payload: Any) -> list[Any]:
            mine = pickle.loads(pickle.dumps(payload))
            if rank == 1:
                sent["payload"] = mine
                raise _Sent
            return [mine, sent["payload"]]

        monkeypatch.setattr(driver, "results", results)
        return cli(*args)

    first = as_rank(1)
    assert isinstance(first.exception, _Sent), first.output
    return as_rank(0)


@pytest.mark.parametrize(
    "args",
    [
        ["spectrum", "vit-plain", "--max-samples", "5", "--batch-size", "2", "--heads"],
        ["spectrum", "bert-docstrings", "--max-samples", "7", "--batch-size", "2", "--heads"],
        ["sweep-lambda", "gpt2-docstrings", "--max-samples", "5", "--batch-size", "2", "--layers", "1"],
        ["rank-decay", "bert-docstrings", "--max-samples", "5", "--batch-size", "3", "--heads"],
        ["rank-decay", "vit-conditioned", "--max-samples", "3", "--batch-size", "1", "--layers", "0"],
        # fewer batches than ranks: rank 1 analyses nothing
        ["spectrum", "vit-plain", "--max-samples", "2", "--batch-size", "2", "--layers", "0"],
    ],
    ids=[
        "spectrum-vit",
        "spectrum-bert-ragged",
        "sweep-gpt2",
        "rank-decay-bert",
        "rank-decay-vit",
        "idle-rank",
    ],
)
def test_two_shards_gathered_are_the_unsharded_report(
    cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    single = cli(*args, "--json")
    assert single.exit_code == 0, single.output
    gathered = sharded(cli, monkeypatch, [*args, "--json"])
    assert gathered.exit_code == 0, gathered.output
    assert gathered.stdout == single.stdout


def test_order_puts_round_robin_batches_back_in_stream_order() -> None:
    order = Order([[0, 1, 4], [2, 3]])  # batches of 2: rank 0 had batches 0 and 2, rank 1 batch 1
    assert order.rows([["a", "b", "e"], ["c", "d"]], "x") == ["a", "b", "c", "d", "e"]
    assert order.positions([[2], [0, 1]]) == [2, 3, 4]  # rank 0's third sample, rank 1's two
    assert order.rows([[], []], "x") == []


def test_order_refuses_values_that_are_not_one_per_sample() -> None:
    order = Order([[0, 1], [2]])
    with pytest.raises(InternalError, match="rank 1 holds 2 values for 1 samples"):
        order.rows([["a", "b"], ["c", "d"]], "x")
    with pytest.raises(InternalError, match="not one stream"):
        Order([[0, 1], [1]])
