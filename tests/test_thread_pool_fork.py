"""A forked child that runs condcli after its parent did (a DataLoader worker, the breadth sweep's children)
gets thread pools of its own: the parent's pool object has no threads in the child, and mapping onto it
waited forever before ``strategies`` dropped its pools at fork."""

from __future__ import annotations

import multiprocessing as mp
import sys

import pytest
import torch

from condcli.spectra import strategies


def _child(queue: mp.Queue) -> None:  # type: ignore[type-arg]
    torch.set_num_threads(2)
    mats = [
        torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(i)) for i in range(4)
    ]
    got = strategies.thread_map(torch.linalg.svdvals, mats)
    queue.put([float(s[0]) for s in got])


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_thread_map_in_a_forked_child_after_the_parent_used_its_pool() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        mats = [
            torch.randn(12, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(i))
            for i in range(4)
        ]
        want = [float(s[0]) for s in strategies.thread_map(torch.linalg.svdvals, mats)]
        assert strategies._POOL  # the parent holds a pool with live threads
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        proc = ctx.Process(target=_child, args=(queue,))
        proc.start()
        proc.join(120)
        hung = proc.is_alive()
        if hung:
            proc.kill()
            proc.join()
        assert not hung, "thread_map waited forever in the forked child"
        assert proc.exitcode == 0
        assert queue.get(timeout=10) == want
    finally:
        torch.set_num_threads(threads)
